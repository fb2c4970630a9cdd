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
                SELECT id, apple_sub, apple_email, apple_refresh_token, apple_linked_at, apple_consent_revoked_at FROM users
                WHERE id = \(userId) AND apple_sub IS NOT NULL
                """
            ).first.map(Columns.init)
        else { return nil }
        let revokedAt: Int64? = try row["apple_consent_revoked_at"]
        return AppleIdentityRecord(
            userId: try row["id"], subject: try row["apple_sub"], email: try row["apple_email"], refreshToken: try row["apple_refresh_token"],
            linkedAt: Date(millis: try row["apple_linked_at"]), consentRevokedAt: revokedAt.map(Date.init(millis:)))
    }

    /// One statement inserts the use or finds it taken (a concurrent first use, from any process, waits for the other's
    /// commit on the primary key, then finds it).
    public func useAppleToken(_ use: AppleTokenUse, now: Date) async throws -> Bool {
        // A second use touches the row (and is taken) only for the same merging guest: `NULL = NULL` is not true.
        !(try await rows(
            """
            INSERT INTO apple_token_uses (subject, digest, expires_at, merging_guest, used_at)
            VALUES (\(use.subject), \(use.digest), \(use.expiresAt.millis), \(use.mergingGuest)::TEXT, \(now.millis))
            ON CONFLICT (subject, digest) DO UPDATE SET used_at = apple_token_uses.used_at
            WHERE apple_token_uses.merging_guest = excluded.merging_guest
            RETURNING 1
            """)).isEmpty
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
                _ = try await storeContact(credential, now: now, on: connection)
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
                    _ = try await storeContact(credential, now: now, on: connection)
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

    /// Under the `sub`'s advisory lock (as its sign-ins and links), one statement gives a revoked consent again and
    /// stores the contact.
    public func appleSignedIn(_ credential: AppleCredential, now: Date) async throws -> Bool {
        try await transaction { connection in
            try await lockApple(credential.subject, on: connection)
            return try await storeContact(credential, now: now, on: connection)
        }
    }

    /// In one transaction: the notice's id taken first, then one statement marks the identity revoked (if it was linked
    /// by the event and not revoked yet), revokes the account's live sessions and lists them in the revocation feed; this
    /// process forgets them at once, the others when told (the caller announces them) or at their next poll.
    public func revokeAppleConsent(_ notice: AppleAccountNotice, now: Date) async throws -> AppleConsentRevocation? {
        let revocation = try await transaction { connection -> AppleConsentRevocation? in
            guard try await take(notice, now: now, on: connection) else { return nil }
            let rows = try await connection.rows(
                """
                WITH account AS (
                  UPDATE users SET apple_consent_revoked_at = \(notice.eventTime.millis), apple_refresh_token = NULL
                  WHERE apple_sub = \(notice.subject) AND apple_linked_at <= \(notice.eventTime.millis) AND apple_consent_revoked_at IS NULL
                  RETURNING id
                ), revoked AS (
                  UPDATE sessions SET revoked_at = \(now.millis)
                  WHERE user_id IN (SELECT id FROM account) AND revoked_at IS NULL RETURNING id, user_id
                ), feed AS (
                  INSERT INTO session_revocations (session_id, user_id) SELECT id, user_id FROM revoked
                )
                SELECT id, ARRAY(SELECT id FROM revoked ORDER BY id) AS revoked FROM account
                """, logger: logger)
            guard let row = rows.first.map(Columns.init) else { return nil }
            return AppleConsentRevocation(userId: try row["id"], revokedSessions: try row["revoked"])
        }
        for id in revocation?.revokedSessions ?? [] { sessions.forget(sessionId: id) }
        return revocation
    }

    /// In one transaction: the notice's id taken first, then the account of the `sub` (linked by the event) locked as a
    /// deletion locks it (sync state, wallet), then deleted when it has no email, else unlinked.
    public func appleAccountDeleted(_ notice: AppleAccountNotice, now: Date) async throws -> AppleAccountDeletion? {
        let outcome = try await transaction { connection -> AppleAccountDeletion? in
            guard try await take(notice, now: now, on: connection),
                let found = try await connection.rows(
                    "SELECT id FROM users WHERE apple_sub = \(notice.subject) AND apple_linked_at <= \(notice.eventTime.millis)", logger: logger
                ).first
            else { return nil }
            let userId: String = try Columns(found)["id"]
            try await lockAccount(userId, on: connection)
            let rows = try await connection.rows(
                """
                SELECT email FROM users
                WHERE id = \(userId) AND apple_sub = \(notice.subject) AND apple_linked_at <= \(notice.eventTime.millis) FOR UPDATE
                """, logger: logger)
            // Unlinked, linked again or deleted since the lookup: look again.
            guard let row = rows.first.map(Columns.init) else { throw RetryTransaction() }
            if try row["email"] as String? == nil {
                _ = try await deleteAccount(userId, on: connection)
                return .deleted(userId: userId)
            }
            try await unlinkApple(userId: userId, on: connection)
            return .unlinked(userId: userId)
        }
        if case .deleted(let userId) = outcome { sessions.forget(userId: userId) }
        return outcome
    }

    /// One statement deletes a batch of each.
    public func purgeAppleRecords(now: Date, limit: Int) async throws -> Int {
        let rows = try await rows(
            """
            WITH uses AS (
              DELETE FROM apple_token_uses WHERE (subject, digest) IN (
                SELECT subject, digest FROM apple_token_uses WHERE expires_at < \(now.millis) LIMIT \(limit)
              ) RETURNING 1
            ), notices AS (
              DELETE FROM apple_notifications WHERE jti IN (
                SELECT jti FROM apple_notifications WHERE keep_until < \(now.millis) LIMIT \(limit)
              ) RETURNING 1
            )
            SELECT (SELECT count(*) FROM uses) + (SELECT count(*) FROM notices) AS purged
            """)
        return Int(try Self.single(rows, "the Apple records' purge")["purged"] as Int64)
    }

    // MARK: In a transaction

    /// Takes the transaction's advisory lock on an Apple `sub`: its sign-ins and links take turns across processes.
    private func lockApple(_ subject: String, on connection: PooledConnection) async throws {
        try await connection.rows("SELECT pg_advisory_xact_lock(hashtextextended('apple:' || \(subject), 0))", logger: logger)
    }

    /// Replaces the stored contact email and refresh token of the `sub`'s account with the credential's, where it has
    /// them, and gives a revoked consent again (the mark cleared, the link time moved to `now`); whether an account has
    /// the `sub`.
    private func storeContact(_ credential: AppleCredential, now: Date, on connection: PooledConnection) async throws -> Bool {
        !(try await connection.rows(
            """
            UPDATE users SET apple_email = coalesce(\(credential.email), apple_email),
              apple_refresh_token = coalesce(\(credential.refreshToken), apple_refresh_token),
              apple_linked_at = CASE WHEN apple_consent_revoked_at IS NULL THEN apple_linked_at ELSE \(now.millis) END,
              apple_consent_revoked_at = NULL
            WHERE apple_sub = \(credential.subject)
            RETURNING 1
            """, logger: logger)).isEmpty
    }

    /// Records the notice's id, the transaction's first write (a copy taken by another process's transaction waits for it
    /// to end, then finds it); whether it is the first time.
    private func take(_ notice: AppleAccountNotice, now: Date, on connection: PooledConnection) async throws -> Bool {
        !(try await connection.rows(
            """
            INSERT INTO apple_notifications (jti, keep_until, received_at) VALUES (\(notice.id), \(notice.keepUntil.millis), \(now.millis))
            ON CONFLICT (jti) DO NOTHING RETURNING 1
            """, logger: logger)).isEmpty
    }

    /// Clears the account's Apple identity.
    private func unlinkApple(userId: String, on connection: PooledConnection) async throws {
        try await connection.rows(
            """
            UPDATE users SET apple_sub = NULL, apple_email = NULL, apple_refresh_token = NULL, apple_linked_at = NULL,
              apple_consent_revoked_at = NULL
            WHERE id = \(userId)
            """, logger: logger)
    }
}
