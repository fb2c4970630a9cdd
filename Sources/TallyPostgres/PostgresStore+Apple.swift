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
        var statement = BoundStatement()
        let write = Writes.useAppleToken(
            subject: statement.bind(use.subject), digest: statement.bind(use.digest), expiresAt: statement.bind(use.expiresAt.millis),
            mergingGuest: statement.bind(use.mergingGuest), now: statement.bind(now.millis))
        return !(try await run(write, statement, changing: [.all])).isEmpty
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
                var touch = BoundStatement()
                let touched = try await run(
                    Writes.touchWallet(userId: touch.bind(userId)), touch, changing: [.user(userId)], on: connection)
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
                var statement = BoundStatement()
                let write = Writes.linkApple(
                    userId: statement.bind(userId), subject: statement.bind(credential.subject), email: statement.bind(credential.email),
                    refreshToken: statement.bind(credential.refreshToken), now: statement.bind(now.millis))
                let rows = try await run(write, statement, changing: [.user(userId)], on: connection)
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
    /// process forgets them once that commits, the others when told (the caller announces them) or at their next poll.
    public func revokeAppleConsent(_ notice: AppleAccountNotice, now: Date) async throws -> AppleConsentRevocation? {
        let revocation = try await transaction { connection -> AppleConsentRevocation? in
            guard try await take(notice, now: now, on: connection) else { return nil }
            var statement = BoundStatement()
            let write = Writes.revokeAppleConsent(
                subject: statement.bind(notice.subject), eventTime: statement.bind(notice.eventTime.millis), now: statement.bind(now.millis))
            let rows = try await connection.rows(statement.query(write.sql), logger: logger)
            note(write, try rows.map { ChangedRows.user(try Columns($0)["id"]) }, on: connection)
            guard let row = rows.first.map(Columns.init) else { return nil }
            return AppleConsentRevocation(userId: try row["id"], revokedSessions: try row["revoked"])
        }
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
        return outcome
    }

    /// One statement deletes a batch of each.
    public func purgeAppleRecords(now: Date, limit: Int) async throws -> Int {
        var statement = BoundStatement()
        let rows = try await run(
            Writes.purgeAppleRecords(now: statement.bind(now.millis), limit: statement.bind(limit)), statement, changing: [.all])
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
        var statement = BoundStatement()
        let write = Writes.storeAppleContact(
            subject: statement.bind(credential.subject), email: statement.bind(credential.email),
            refreshToken: statement.bind(credential.refreshToken), now: statement.bind(now.millis))
        let rows = try await connection.rows(statement.query(write.sql), logger: logger)
        note(write, try rows.map { ChangedRows.user(try Columns($0)["id"]) }, on: connection)
        return !rows.isEmpty
    }

    /// Records the notice's id, the transaction's first write (a copy taken by another process's transaction waits for it
    /// to end, then finds it); whether it is the first time.
    private func take(_ notice: AppleAccountNotice, now: Date, on connection: PooledConnection) async throws -> Bool {
        var statement = BoundStatement()
        let write = Writes.takeAppleNotice(
            id: statement.bind(notice.id), keepUntil: statement.bind(notice.keepUntil.millis), now: statement.bind(now.millis))
        return !(try await run(write, statement, changing: [.all], on: connection)).isEmpty
    }

    /// Clears the account's Apple identity.
    private func unlinkApple(userId: String, on connection: PooledConnection) async throws {
        var statement = BoundStatement()
        try await run(Writes.unlinkApple(userId: statement.bind(userId)), statement, changing: [.user(userId)], on: connection)
    }
}
