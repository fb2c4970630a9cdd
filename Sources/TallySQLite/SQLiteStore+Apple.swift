import Foundation
import GRDB
import TallyStore

extension SQLiteStore: AppleIdentityStore {
    /// The account of an Apple `sub`, from a reader.
    public func appleAccount(subject: String) async throws -> UserRecord? {
        try await read { db in
            try db.fetchRow(sql: "SELECT * FROM users WHERE apple_sub = ?", arguments: [subject]).map(UserRecord.init(row:))
        }
    }

    /// The account's Apple identity, from a reader.
    public func appleIdentity(userId: String) async throws -> AppleIdentityRecord? {
        try await read { db in
            try db.fetchRow(
                sql: "SELECT id, apple_sub, apple_email, apple_refresh_token, apple_linked_at FROM users WHERE id = ? AND apple_sub IS NOT NULL",
                arguments: [userId]
            ).map { row in
                AppleIdentityRecord(
                    userId: row["id"], subject: row["apple_sub"], email: row["apple_email"], refreshToken: row["apple_refresh_token"],
                    linkedAt: Date(millis: row["apple_linked_at"]))
            }
        }
    }

    /// Finds or creates the account of the `sub` and opens a session, in one writer transaction (the single writer makes
    /// concurrent first sign-ins of one `sub` one account; the unique index would refuse a second).
    public func signInWithApple(
        _ credential: AppleCredential, sessionId: String, refresh: NewRefreshToken, sessionsPerUser: Int, signupGrant: Int64, now: Date
    ) async throws -> SessionGrant {
        try await writeSession { db in
            var created = false
            let user: UserRecord
            if let row = try db.fetchRow(sql: "SELECT * FROM users WHERE apple_sub = ?", arguments: [credential.subject]) {
                user = UserRecord(row: row)
                try Self.storeContact(credential, userId: user.id, db)
            } else {
                var account = GuestSignup.newGuest(now: now)
                account.hasAppleIdentity = true
                try db.run(
                    sql: """
                        INSERT INTO users (id, timezone, created_at, apple_sub, apple_email, apple_refresh_token, apple_linked_at)
                        VALUES (?, 'UTC', ?, ?, ?, ?, ?)
                        """,
                    arguments: [account.id, now.millis, credential.subject, credential.email, credential.refreshToken, now.millis])
                try db.run(sql: "INSERT INTO wallets (user_id, balance, held, version) VALUES (?, 0, 0, 0)", arguments: [account.id])
                if let grant = GuestSignup.grant(signupGrant) { try self.append(grant, userId: account.id, now: now, db) }
                (user, created) = (account, true)
            }
            try self.insertSession(db, userId: user.id, sessionId: sessionId, refresh: refresh, limit: sessionsPerUser, now: now)
            return SessionGrant(user: user, sessionId: sessionId, created: created)
        }
    }

    /// Links the identity in place and detaches a guest from its installation, in one writer transaction.
    public func linkApple(userId: String, credential: AppleCredential, now: Date) async throws -> UserRecord {
        try await write { db in
            guard let row = try db.fetchRow(sql: "SELECT * FROM users WHERE id = ? AND merged_into IS NULL", arguments: [userId]) else {
                throw StoreError(.userNotFound)
            }
            var user = UserRecord(row: row)
            let owner = try db.fetchValue(String.self, sql: "SELECT id FROM users WHERE apple_sub = ?", arguments: [credential.subject])
            if let owner, owner != userId { throw StoreError(.appleIdentityInUse) }
            if owner == userId {
                try Self.storeContact(credential, userId: userId, db)
                return user
            }
            if user.hasAppleIdentity { throw StoreError(.alreadyLinked) }
            try db.run(
                sql: """
                    UPDATE users SET apple_sub = ?, apple_email = ?, apple_refresh_token = ?, apple_linked_at = ?, installation = NULL
                    WHERE id = ?
                    """,
                arguments: [credential.subject, credential.email, credential.refreshToken, now.millis, userId])
            user.hasAppleIdentity = true
            return user
        }
    }

    /// Stores or clears the refresh token of an account with an Apple identity.
    public func setAppleRefreshToken(userId: String, _ refreshToken: String?) async throws -> Bool {
        try await write { db in
            try db.run(sql: "UPDATE users SET apple_refresh_token = ? WHERE id = ? AND apple_sub IS NOT NULL", arguments: [refreshToken, userId])
            return db.changesCount > 0
        }
    }

    /// Unlinks the identity and revokes the account's sessions, in one writer transaction.
    public func revokeAppleConsent(subject: String, now: Date) async throws -> AppleConsentRevocation? {
        try await write { db in
            guard let userId = try Self.unlinkApple(subject: subject, db) else { return nil }
            return AppleConsentRevocation(userId: userId, revokedSessions: try self.revokeSessions(ofUser: userId, now: now, db))
        }
    }

    /// Deletes the account of the `sub` when it has no email, else unlinks the identity, in one writer transaction.
    public func appleAccountDeleted(subject: String, now: Date) async throws -> AppleAccountDeletion? {
        try await write { db in
            guard let row = try db.fetchRow(sql: "SELECT id, email FROM users WHERE apple_sub = ?", arguments: [subject]) else {
                return nil
            }
            let userId: String = row["id"]
            if (row["email"] as String?) == nil {
                _ = try self.deleteAccount(userId, db)
                return .deleted(userId: userId)
            }
            _ = try Self.unlinkApple(subject: subject, db)
            return .unlinked(userId: userId)
        }
    }

    // MARK: In a transaction

    /// Replaces the stored contact email and refresh token with the credential's, where it has them.
    private static func storeContact(_ credential: AppleCredential, userId: String, _ db: Database) throws {
        guard credential.email != nil || credential.refreshToken != nil else { return }
        try db.run(
            sql: "UPDATE users SET apple_email = coalesce(?, apple_email), apple_refresh_token = coalesce(?, apple_refresh_token) WHERE id = ?",
            arguments: [credential.email, credential.refreshToken, userId])
    }

    /// Clears the Apple identity of the `sub`; the account it was linked to, if any.
    private static func unlinkApple(subject: String, _ db: Database) throws -> String? {
        try db.fetchValue(
            String.self,
            sql: """
                UPDATE users SET apple_sub = NULL, apple_email = NULL, apple_refresh_token = NULL, apple_linked_at = NULL
                WHERE apple_sub = ? RETURNING id
                """,
            arguments: [subject])
    }
}
