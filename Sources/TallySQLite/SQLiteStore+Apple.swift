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
                sql: """
                    SELECT id, apple_sub, apple_email, apple_refresh_token, apple_linked_at, apple_consent_revoked_at FROM users
                    WHERE id = ? AND apple_sub IS NOT NULL
                    """,
                arguments: [userId]
            ).map { row in
                AppleIdentityRecord(
                    userId: row["id"], subject: row["apple_sub"], email: row["apple_email"], refreshToken: row["apple_refresh_token"],
                    linkedAt: Date(millis: row["apple_linked_at"]),
                    consentRevokedAt: (row["apple_consent_revoked_at"] as Int64?).map(Date.init(millis:)))
            }
        }
    }

    /// Inserts the use, or finds it taken, in one writer statement.
    public func useAppleToken(_ use: AppleTokenUse, now: Date) async throws -> Bool {
        try await write { db in
            // A second use touches the row (and is taken) only for the same merging guest: `NULL = NULL` is not true.
            try db.fetchFirst(
                SQLiteWrites.useAppleToken, changing: .all,
                arguments: [use.subject, use.digest, use.expiresAt.millis, use.mergingGuest, now.millis], { _ in () }) != nil
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
                try Self.storeContact(credential, of: user.id, now: now, db)
            } else {
                var account = GuestSignup.newGuest(now: now)
                account.hasAppleIdentity = true
                try db.run(
                    SQLiteWrites.createAppleAccount, changing: .user(account.id),
                    arguments: [account.id, now.millis, credential.subject, credential.email, credential.refreshToken, now.millis])
                try db.run(SQLiteWrites.createWallet, changing: .user(account.id), arguments: [account.id])
                if let grant = GuestSignup.grant(signupGrant) { try self.append(grant, userId: account.id, from: .empty, now: now, db) }
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
                try Self.storeContact(credential, of: userId, now: now, db)
                return user
            }
            if user.hasAppleIdentity { throw StoreError(.alreadyLinked) }
            try db.run(
                SQLiteWrites.linkApple, changing: .user(userId),
                arguments: [credential.subject, credential.email, credential.refreshToken, now.millis, userId])
            user.hasAppleIdentity = true
            return user
        }
    }

    /// Gives a revoked consent again and stores the contact, in one writer statement.
    public func appleSignedIn(_ credential: AppleCredential, now: Date) async throws -> Bool {
        try await write { db in
            guard
                let userId = try db.fetchValue(String.self, sql: "SELECT id FROM users WHERE apple_sub = ?", arguments: [credential.subject])
            else { return false }
            try Self.storeContact(credential, of: userId, now: now, db)
            return db.changesCount > 0
        }
    }

    /// Takes the notice, then marks the identity revoked and revokes the account's sessions, in one writer transaction.
    public func revokeAppleConsent(_ notice: AppleAccountNotice, now: Date) async throws -> AppleConsentRevocation? {
        try await write { db in
            guard let userId = try Self.take(notice, now: now, db) else { return nil }
            try db.run(SQLiteWrites.revokeAppleConsent, changing: .user(userId), arguments: [notice.eventTime.millis, userId])
            guard db.changesCount == 1 else { return nil }
            return AppleConsentRevocation(userId: userId, revokedSessions: try self.revokeSessions(ofUser: userId, now: now, db))
        }
    }

    /// Takes the notice, then deletes the account of the `sub` when it has no email, else unlinks the identity, in one
    /// writer transaction.
    public func appleAccountDeleted(_ notice: AppleAccountNotice, now: Date) async throws -> AppleAccountDeletion? {
        try await write { db in
            guard let userId = try Self.take(notice, now: now, db) else { return nil }
            if try db.fetchValue(String.self, sql: "SELECT email FROM users WHERE id = ?", arguments: [userId]) == nil {
                _ = try self.deleteAccount(userId, db)
                return .deleted(userId: userId)
            }
            try Self.unlinkApple(userId: userId, db)
            return .unlinked(userId: userId)
        }
    }

    /// Deletes one batch of token uses and notification ids past their time, in one writer transaction.
    public func purgeAppleRecords(now: Date, limit: Int) async throws -> Int {
        try await write { db in
            try db.run(SQLiteWrites.purgeAppleTokenUses, changing: .all, arguments: [now.millis, limit])
            let uses = db.changesCount
            try db.run(SQLiteWrites.purgeAppleNotices, changing: .all, arguments: [now.millis, limit])
            return uses + db.changesCount
        }
    }

    // MARK: In a transaction

    /// Replaces the stored contact email and refresh token with the credential's, where it has them, and gives a revoked
    /// consent again (the mark cleared, the link time moved to `now`). `userId`: the account of the `sub`.
    private static func storeContact(_ credential: AppleCredential, of userId: String, now: Date, _ db: Database) throws {
        try db.run(
            SQLiteWrites.storeAppleContact, changing: .user(userId),
            arguments: [credential.email, credential.refreshToken, now.millis, credential.subject])
    }

    /// Records the notice's id and finds the account it may act on: nil for an id seen before (the insert is the
    /// transaction's first write), a `sub` no account has, or an identity linked after the event.
    private static func take(_ notice: AppleAccountNotice, now: Date, _ db: Database) throws -> String? {
        try db.run(
            SQLiteWrites.recordAppleNotice, changing: .all,
            arguments: [notice.id, notice.keepUntil.millis, now.millis])
        guard db.changesCount == 1 else { return nil }
        return try db.fetchValue(
            String.self, sql: "SELECT id FROM users WHERE apple_sub = ? AND apple_linked_at <= ?",
            arguments: [notice.subject, notice.eventTime.millis])
    }

    /// Clears the account's Apple identity.
    static func unlinkApple(userId: String, _ db: Database) throws {
        try db.run(SQLiteWrites.unlinkApple, changing: .user(userId), arguments: [userId])
    }
}
