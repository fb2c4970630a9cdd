import Foundation
import Logging
import PostgresNIO
import TallyStore

extension PostgresStore {
    /// The account of an Apple `sub`: one lookup of the unique index.
    public func appleAccount(subject: String) async throws -> UserRecord? {
        try await rows("SELECT \(unescaped: UserRecord.columns()) FROM users WHERE apple_sub = \(subject)").first.map { try UserRecord(Columns($0)) }
    }

    /// The account's Apple identity.
    public func appleIdentity(userId: String) async throws -> AppleIdentityRecord? {
        guard
            let row = try await rows(
                """
                SELECT id, apple_sub, apple_email, apple_refresh_token, apple_linked_at FROM users
                WHERE id = \(userId) AND apple_sub IS NOT NULL
                """
            ).first.map(Columns.init)
        else { return nil }
        return AppleIdentityRecord(
            userId: try row["id"], subject: try row["apple_sub"], email: try row["apple_email"], refreshToken: try row["apple_refresh_token"],
            linkedAt: Date(millis: try row["apple_linked_at"]))
    }

    /// In one transaction under an advisory lock on the `sub` (so concurrent first sign-ins of one `sub`, from any
    /// instance, make one account; the unique constraint is the backstop): the credential's contact stored, and a session
    /// opened for the account of the `sub`, or for a new account created with it.
    public func signInWithApple(
        _ credential: AppleCredential, sessionId: String, refresh: NewRefreshToken, sessionsPerUser: Int, signupGrant: Int64, now: Date
    ) async throws -> SessionGrant {
        try await remembering {
            try await transaction { connection in
                try await lockApple(credential.subject, on: connection)
                try await storeContact(credential, on: connection)
                let session = NewSession(id: sessionId, refresh: refresh, limit: sessionsPerUser)
                if let user = try await open(session, for: .apple(credential.subject), now: now, on: connection) {
                    return SessionGrant(user: user, sessionId: sessionId, created: false)
                }
                var user = GuestSignup.newGuest(now: now)
                user.hasAppleIdentity = true
                try await insertAccount(user, kind: .apple(credential), session: session, now: now, on: connection)
                try await creditSignupGrant(signupGrant, userId: user.id, now: now, on: connection)
                return SessionGrant(user: user, sessionId: sessionId, created: true)
            }
        }
    }

    /// In one transaction under the `sub`'s advisory lock: the wallet row rewritten unchanged first (locked before the
    /// user, as commands do: an optimistic action planned while the account was a guest, which would charge the
    /// installation too, fails its compare-and-set), then the account linked and detached from its installation.
    public func linkApple(userId: String, credential: AppleCredential, now: Date) async throws -> UserRecord {
        do {
            return try await transaction { connection in
                try await lockApple(credential.subject, on: connection)
                let touched = try await connection.rows(
                    "UPDATE wallets SET version = version WHERE user_id = \(userId) RETURNING user_id", logger: logger)
                let found = try await connection.rows(
                    """
                    SELECT \(unescaped: UserRecord.columns()), apple_sub,
                           (SELECT o.id FROM users o WHERE o.apple_sub = \(credential.subject)) AS owner
                    FROM users WHERE id = \(userId) AND merged_into IS NULL
                    """, logger: logger)
                guard !touched.isEmpty, let row = found.first.map(Columns.init) else { throw StoreError(.userNotFound) }
                let user = try UserRecord(row)
                let linked: String? = try row["apple_sub"]
                let owner: String? = try row["owner"]
                if let owner, owner != userId { throw StoreError(.appleIdentityInUse) }
                if owner == userId {
                    try await storeContact(credential, on: connection)
                    return user
                }
                if linked != nil { throw StoreError(.alreadyLinked) }
                let rows = try await connection.rows(
                    """
                    UPDATE users SET apple_sub = \(credential.subject), apple_email = \(credential.email),
                      apple_refresh_token = \(credential.refreshToken), apple_linked_at = \(now.millis), installation = NULL
                    WHERE id = \(userId) AND apple_sub IS NULL
                    RETURNING \(unescaped: UserRecord.columns())
                    """, logger: logger)
                guard let updated = rows.first else { throw RetryTransaction() }
                return try UserRecord(Columns(updated))
            }
        } catch let error as StoreError where error.violates("users_apple_sub_key") {
            throw StoreError(.appleIdentityInUse)
        }
    }

    /// One statement.
    public func setAppleRefreshToken(userId: String, _ refreshToken: String?) async throws -> Bool {
        !(try await rows(
            "UPDATE users SET apple_refresh_token = \(refreshToken) WHERE id = \(userId) AND apple_sub IS NOT NULL RETURNING 1")).isEmpty
    }

    /// One statement unlinks the identity, revokes the account's live sessions and lists them in the revocation feed;
    /// this process forgets them at once, the others when told (the caller announces them) or at their next poll.
    public func revokeAppleConsent(subject: String, now: Date) async throws -> AppleConsentRevocation? {
        let rows = try await rows(
            """
            WITH account AS (
              UPDATE users SET apple_sub = NULL, apple_email = NULL, apple_refresh_token = NULL, apple_linked_at = NULL
              WHERE apple_sub = \(subject) RETURNING id
            ), revoked AS (
              UPDATE sessions SET revoked_at = \(now.millis)
              WHERE user_id IN (SELECT id FROM account) AND revoked_at IS NULL RETURNING id, user_id
            ), feed AS (
              INSERT INTO session_revocations (session_id, user_id) SELECT id, user_id FROM revoked
            )
            SELECT id, ARRAY(SELECT id FROM revoked ORDER BY id) AS revoked FROM account
            """)
        guard let row = rows.first.map(Columns.init) else { return nil }
        let revoked: [String] = try row["revoked"]
        for id in revoked { sessions.forget(sessionId: id) }
        return AppleConsentRevocation(userId: try row["id"], revokedSessions: revoked)
    }

    /// In one transaction: the account of the `sub` locked as a deletion locks it (sync state, wallet), then deleted when
    /// it has no email, else unlinked.
    public func appleAccountDeleted(subject: String, now: Date) async throws -> AppleAccountDeletion? {
        let outcome = try await transaction { connection -> AppleAccountDeletion? in
            guard let found = try await connection.rows("SELECT id FROM users WHERE apple_sub = \(subject)", logger: logger).first else {
                return nil
            }
            let userId: String = try Columns(found)["id"]
            try await lockAccount(userId, on: connection)
            let rows = try await connection.rows(
                "SELECT email FROM users WHERE id = \(userId) AND apple_sub = \(subject) FOR UPDATE", logger: logger)
            // Unlinked or deleted since the lookup: look again.
            guard let row = rows.first.map(Columns.init) else { throw RetryTransaction() }
            if try row["email"] as String? == nil {
                _ = try await deleteAccount(userId, on: connection)
                return .deleted(userId: userId)
            }
            try await connection.rows(
                """
                UPDATE users SET apple_sub = NULL, apple_email = NULL, apple_refresh_token = NULL, apple_linked_at = NULL
                WHERE id = \(userId)
                """, logger: logger)
            return .unlinked(userId: userId)
        }
        if case .deleted(let userId) = outcome { sessions.forget(userId: userId) }
        return outcome
    }

    // MARK: In a transaction

    /// Takes the transaction's advisory lock on an Apple `sub`: its sign-ins and links take turns across processes.
    private func lockApple(_ subject: String, on connection: PooledConnection) async throws {
        try await connection.rows("SELECT pg_advisory_xact_lock(hashtextextended('apple:' || \(subject), 0))", logger: logger)
    }

    /// Replaces the stored contact email and refresh token of the `sub`'s account with the credential's, where it has them.
    private func storeContact(_ credential: AppleCredential, on connection: PooledConnection) async throws {
        guard credential.email != nil || credential.refreshToken != nil else { return }
        try await connection.rows(
            """
            UPDATE users SET apple_email = coalesce(\(credential.email), apple_email),
              apple_refresh_token = coalesce(\(credential.refreshToken), apple_refresh_token)
            WHERE apple_sub = \(credential.subject)
            """, logger: logger)
    }
}
