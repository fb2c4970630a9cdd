import Foundation
import Logging
import PostgresNIO
import TallyStore

extension PostgresStore {
    /// The guest of a known installation (device hash) signs in with one statement. Otherwise the call takes
    /// advisory locks on the device hash and its address (in that order, so two sign-ups cannot deadlock),
    /// then looks again with a fresh snapshot: of several concurrent calls for an installation without a
    /// guest, from any number of instances, exactly one creates the guest (and the installation, the first
    /// time) and the others find it.
    public func signInGuest(
        deviceHash: String, ipHash: String, signupsPerHour: Int, signupGrant: Int64, sessionId: String,
        refresh: NewRefreshToken, sessionsPerUser: Int, now: Date
    ) async throws -> SessionGrant {
        try await remembering {
            try await openGuestSession(
                deviceHash: deviceHash, ipHash: ipHash, signupsPerHour: signupsPerHour, signupGrant: signupGrant,
                session: NewSession(id: sessionId, refresh: refresh, limit: sessionsPerUser), now: now)
        }
    }

    /// Opens a session for a new device's guest, taking the locks, or for the device's account.
    private func openGuestSession(
        deviceHash: String, ipHash: String, signupsPerHour: Int, signupGrant: Int64, session: NewSession, now: Date
    ) async throws -> SessionGrant {
        let sessionId = session.id
        if let user = try await open(session, for: .device(deviceHash), now: now, on: nil) {
            return SessionGrant(user: user, sessionId: sessionId, created: false)
        }
        return try await transaction { connection in
            try await connection.rows(
                """
                SELECT pg_advisory_xact_lock(hashtextextended('device:' || \(deviceHash), 0)),
                       pg_advisory_xact_lock(hashtextextended('ip:' || \(ipHash), 0))
                """, logger: logger)
            if let user = try await open(session, for: .device(deviceHash), now: now, on: connection) {
                return SessionGrant(user: user, sessionId: sessionId, created: false)
            }
            let windowStart = GuestSignup.windowStart(now: now).millis
            let recent = try Self.single(
                try await connection.rows(
                    """
                    SELECT count(*) AS signups, min(created_at) AS oldest FROM guest_signups
                    WHERE ip_hash = \(ipHash) AND created_at > \(windowStart)
                    """, logger: logger), "the sign-up count")
            let count: Int64 = try recent["signups"]
            let oldest: Int64? = try recent["oldest"]
            try GuestSignup.admit(count: Int(count), oldest: oldest.map(Date.init(millis:)), perHour: signupsPerHour, now: now)
            let user = GuestSignup.newGuest(now: now)
            try await insertAccount(
                user, kind: .guest(deviceHash: deviceHash, ipHash: ipHash), session: session, now: now, on: connection)
            try await creditSignupGrant(signupGrant, userId: user.id, now: now, on: connection)
            return SessionGrant(user: user, sessionId: sessionId, created: true)
        }
    }

    /// What a new account is: a guest of an installation (created the first time), counted against its address's
    /// sign-ups, or the account of an Apple identity.
    enum NewAccount {
        case guest(deviceHash: String, ipHash: String)
        case apple(AppleCredential)
    }

    /// Inserts `user` — a guest on its installation, or an Apple identity's account — with an empty wallet, and its
    /// first session and refresh token, in one statement in the transaction of `connection`.
    func insertAccount(_ user: UserRecord, kind: NewAccount, session: NewSession, now: Date, on connection: PooledConnection) async throws {
        var (deviceHash, ipHash, apple): (String?, String?, AppleCredential?)
        switch kind {
        case .guest(let device, let ip): (deviceHash, ipHash) = (device, ip)
        case .apple(let credential): apple = credential
        }
        var statement = BoundStatement()
        let write = Writes.insertAccount(
            userId: statement.bind(user.id), deviceHash: statement.bind(deviceHash), ipHash: statement.bind(ipHash),
            appleSubject: statement.bind(apple?.subject), appleEmail: statement.bind(apple?.email),
            appleRefreshToken: statement.bind(apple?.refreshToken), appleLinkedAt: statement.bind(apple.map { _ in now.millis }),
            sessionId: statement.bind(session.id), refreshHash: statement.bind(session.refresh.hash),
            refreshExpiresAt: statement.bind(session.refresh.expiresAt.millis), now: statement.bind(now.millis))
        try await run(write, statement, changing: [.user(user.id)], on: connection)
    }

    /// The sign-up grant of an account created in the transaction of `connection`, if any: it moves the new wallet as
    /// every ledger write does (a second statement: the one that inserted the wallet cannot see it in its snapshot).
    func creditSignupGrant(_ amount: Int64, userId: String, now: Date, on connection: PooledConnection) async throws {
        guard let grant = GuestSignup.grant(amount) else { return }
        var ledger = LedgerRows()
        ledger.move(userId: userId, from: WalletState(balance: 0, held: 0, version: 0), entries: [(nil, grant)], now: now)
        var statement = BoundStatement()
        let source = statement.relation([ledger], as: "b")
        let moved = try Self.single(
            try await run(Writes.ledgerMove(source: source), statement, changing: [.user(userId)], on: connection), "the sign-up grant")
        guard try moved["moved"] == Int64(1) else { throw RetryTransaction() }
    }

    /// A session to open: its id, its first refresh token, and the account's cap on live sessions.
    struct NewSession: Sendable {
        var id: String
        var refresh: NewRefreshToken
        var limit: Int
    }

    /// Whose session: the guest of an installation (a device secret's hash), an account by id, or the account of an
    /// Apple identity (its `sub`).
    enum SessionOwner: Sendable {
        case device(String)
        case user(String)
        case apple(String)
    }

    /// Opens `session` for the owner's account, if there is one, and revokes (and lists in the revocation
    /// feed) the account's oldest live sessions beyond `session.limit`: one statement, in the transaction of
    /// `connection`, or on its own when `nil`. The statement's snapshot does not see the new session, so it keeps
    /// the newest ``SessionCap/othersKept(limit:)`` of the others in the order of ``SessionCap/newestFirst``
    /// (TallyStore's rule, SQLite's too). This process forgets the revoked ones when the statement commits.
    func open(_ session: NewSession, for owner: SessionOwner, now: Date, on connection: PooledConnection?) async throws
        -> UserRecord?
    {
        var userId: String?
        var deviceHash: String?
        var appleSubject: String?
        switch owner {
        case .device(let hash): deviceHash = hash
        case .user(let id): userId = id
        case .apple(let subject): appleSubject = subject
        }
        var statement = BoundStatement()
        let write = Writes.openSession(
            userId: statement.bind(userId), deviceHash: statement.bind(deviceHash), appleSubject: statement.bind(appleSubject),
            sessionId: statement.bind(session.id), refreshHash: statement.bind(session.refresh.hash),
            refreshExpiresAt: statement.bind(session.refresh.expiresAt.millis),
            keep: statement.bind(SessionCap.othersKept(limit: session.limit)), now: statement.bind(now.millis))
        let rows: [PostgresRow]
        if let connection {
            rows = try await connection.rows(statement.query(write.sql), logger: logger)
        } else {
            rows = try await self.rows(statement.query(write.sql))
        }
        guard let row = rows.first.map(Columns.init) else {
            note(write, [ChangedRows](), on: connection)
            return nil
        }
        let user = try UserRecord(row)
        let revoked: [String] = try row["revoked"]
        note(write, [ChangedRows.session(session.id)] + revoked.map(ChangedRows.session), on: connection)
        return user
    }

    /// Opens a session for an existing account: one statement that reads the account, inserts the session
    /// and revokes the oldest beyond the cap.
    public func openSession(
        userId: String, sessionId: String, refresh: NewRefreshToken, sessionsPerUser: Int, now: Date
    ) async throws -> SessionGrant {
        try await remembering {
            let session = NewSession(id: sessionId, refresh: refresh, limit: sessionsPerUser)
            guard let user = try await open(session, for: .user(userId), now: now, on: nil) else {
                throw StoreError(.userNotFound)
            }
            return SessionGrant(user: user, sessionId: sessionId, created: false)
        }
    }

    /// Runs a call that opens or renews a session, then remembers the session as live (``LiveSessions``):
    /// this process's first request of a new session would otherwise look it up. The epoch is taken
    /// first, so a revocation racing the call is not undone.
    func remembering(_ open: () async throws -> SessionGrant) async throws -> SessionGrant {
        // The commit of `open` makes the cache forget the new session's id (its row changed); that forgetting is the
        // call's own and moves the epoch it stands on, so only someone else's forgetting refuses the session.
        let epoch = RememberingEpoch(sessions.epoch)
        let grant = try await RememberingEpoch.$current.withValue(epoch) { try await open() }
        sessions.remember(grant.sessionId, user: grant.user.id, readAt: epoch.epoch)
        return grant
    }

    /// One statement claims the token (`used_at IS NULL` decides between concurrent claims, even across
    /// instances) and stores `next`. A token already used, or claimed by a concurrent call, revokes its
    /// session in a second statement, committed before `.refreshTokenReused` is thrown.
    public func rotateRefreshToken(hash: String, next: NewRefreshToken, now: Date) async throws -> SessionGrant {
        try await remembering { try await rotate(hash: hash, next: next, now: now) }
    }

    private func rotate(hash: String, next: NewRefreshToken, now: Date) async throws -> SessionGrant {
        var statement = BoundStatement()
        let write = Writes.rotateRefreshToken(
            hash: statement.bind(hash), nextHash: statement.bind(next.hash), nextExpiresAt: statement.bind(next.expiresAt.millis),
            now: statement.bind(now.millis))
        let rows = try await self.rows(statement.query(write.sql))
        note(write, try rows.map { ChangedRows.session(try Columns($0)["session_id"]) }, on: nil)
        guard let row = rows.first.map(Columns.init) else { throw StoreError(.invalidRefreshToken) }
        let sessionId: String = try row["session_id"]
        let expiresAt: Int64 = try row["expires_at"]
        let usedAt: Int64? = try row["used_at"]
        let revokedAt: Int64? = try row["revoked_at"]
        let user = try UserRecord(row)
        let claimed: Int64 = try row["claimed"]
        let presented = PresentedRefreshToken(
            sessionId: sessionId, expiresAt: Date(millis: expiresAt), usedAt: usedAt.map(Date.init(millis:)),
            sessionRevokedAt: revokedAt.map(Date.init(millis:)))
        // The rules are TallyStore's (``RefreshTokenPolicy``): the claim above took exactly the tokens it rotates; one
        // it would rotate that the claim missed was taken by a concurrent call: presented twice, so reuse.
        switch RefreshTokenPolicy.decide(presented, now: now, claimed: claimed == 1) {
        case .rotate:
            return SessionGrant(user: user, sessionId: sessionId, created: false)
        case .revokeSession:
            try await revokeSession(id: sessionId, now: now)
            throw StoreError(.refreshTokenReused)
        case .refuse:
            throw StoreError(.invalidRefreshToken)
        }
    }

    /// Revokes a session (keeps the first revocation time) and lists it in the revocation feed, in one
    /// statement; this process forgets it once that returns (committed), the others at their next poll.
    public func revokeSession(id: String, now: Date) async throws {
        var statement = BoundStatement()
        let write = Writes.revokeSession(id: statement.bind(id), now: statement.bind(now.millis))
        try await run(write, statement, changing: [.session(id)])
    }

    /// Forgets a session another process revoked, on hearing it did (its notification): the revocation was
    /// committed before it was announced, so the next lookup finds it revoked, and one in flight cannot put it
    /// back (``LiveSessions/forget(sessionId:)`` moves the epoch). The revocation feed stays the fallback.
    public func sessionEnded(id: String) {
        sessions.forget(sessionId: id)
    }

    /// Forgets every session of an account another process deleted, on hearing it did (see ``sessionEnded(id:)``).
    public func accountDeleted(userId: String) {
        sessions.forget(userId: userId)
    }

    /// The session of a refresh token: one primary-key lookup.
    public func refreshTokenSession(hash: String) async throws -> String? {
        guard let row = try await rows("SELECT session_id FROM refresh_tokens WHERE token_hash = \(hash)").first else { return nil }
        return try Columns(row)["session_id"]
    }

    /// The user of a session that is not revoked: from memory while the revocation feed is fresh
    /// (``LiveSessions``), else one primary-key lookup (``SessionUserStatement``).
    public func liveSessionUser(sessionId: String) async throws -> String? {
        if let userId = sessions.user(of: sessionId) { return userId }
        let epoch = sessions.epoch
        guard let row = try await retrying({ try await prepared(SessionUserStatement(sessionId: sessionId)) }).first
        else { return nil }
        let userId: String = try Columns(row)["user_id"]
        sessions.remember(sessionId, user: userId, readAt: epoch)
        return userId
    }

    /// Sessions revoked and accounts deleted in the last ``revocationWindow`` of the database's clock.
    func recentRevocations() async throws -> [SessionRevocation] {
        let window = Self.revocationWindow.components.seconds * 1000
        return try await rows(
            """
            SELECT session_id, user_id FROM session_revocations
            WHERE revoked_at > (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT - \(window)
            """
        ).map { row in
            let row = Columns(row)
            return SessionRevocation(sessionId: try row["session_id"], userId: try row["user_id"])
        }
    }

    /// One poll of the revocation feed: this process forgets what it lists.
    func pollRevocations() async throws {
        let start = sessions.pollStart
        sessions.apply(try await recentRevocations(), polledAt: start)
    }

    /// One statement links a guest and detaches it from its installation (the device secret no longer opens
    /// it; the schema's `CHECK` refuses a linked account with an installation); the unique constraint on
    /// `users.email` refuses an email in use, also when two accounts link it concurrently. The wallet row is
    /// rewritten unchanged first (locked before the user, as commands do), so an optimistic action planned
    /// from the old user row — which would have charged the installation too — fails its compare-and-set.
    public func linkCredentials(userId: String, email: String, passwordHash: String) async throws -> UserRecord {
        let rows: [PostgresRow]
        do {
            var statement = BoundStatement()
            let write = Writes.linkCredentials(
                userId: statement.bind(userId), email: statement.bind(email), passwordHash: statement.bind(passwordHash))
            rows = try await run(write, statement, changing: [.user(userId)])
        } catch let error as StoreError where error.violates("users_email_key") {
            throw StoreError(.credentialInUse)
        }
        if let row = rows.first { return try UserRecord(Columns(row)) }
        guard try await user(id: userId) != nil else { throw StoreError(.userNotFound) }
        throw StoreError(.alreadyLinked)
    }

    /// The account and password hash for an email, if any.
    public func passwordHash(email: String) async throws -> (userId: String, passwordHash: String)? {
        guard let row = try await rows("SELECT id, password_hash FROM users WHERE email = \(email)").first.map(Columns.init) else {
            return nil
        }
        guard let hash: String = try row["password_hash"] else { return nil }
        return (try row["id"], hash)
    }

    /// Under an advisory lock on the account key (so concurrent attempts, from any instance, take turns):
    /// reads the pair's and the account's failures, lets `policy` decide, and stores the counted attempt.
    public func beginSignIn(account: String, address: String, policy: SignInPolicy, now: Date) async throws -> SignInDecision {
        try await transaction { connection in
            try await connection.rows("SELECT pg_advisory_xact_lock(hashtextextended('sign-in:' || \(account), 0))", logger: logger)
            var pair: SignInFailures?
            var total: SignInFailures?
            let rows = try await connection.rows(
                """
                SELECT address_key, failures, last_failure_at, locked_until FROM sign_in_failures
                WHERE account_key = \(account) AND address_key IN ('', \(address))
                """, logger: logger)
            for row in rows.map(Columns.init) {
                let key: String = try row["address_key"]
                let count: Int64 = try row["failures"]
                let lastAt: Int64 = try row["last_failure_at"]
                let lockedUntil: Int64? = try row["locked_until"]
                let failures = SignInFailures(
                    count: Int(count), lastAt: Date(millis: lastAt), lockedUntil: lockedUntil.map(Date.init(millis:)))
                if key.isEmpty { total = failures } else { pair = failures }
            }
            let decision = policy.decide(pair: pair, account: total, now: now)
            if case .admit(let pair, let total, _) = decision {
                var statement = BoundStatement()
                let write = Writes.countSignInFailure(
                    account: statement.bind(account), address: statement.bind(address), failures: statement.bind(pair.count),
                    lastAt: statement.bind(pair.lastAt.millis), lockedUntil: statement.bind(pair.lockedUntil?.millis),
                    total: statement.bind(total.count), totalLastAt: statement.bind(total.lastAt.millis))
                try await run(write, statement, changing: [.all], on: connection)
            }
            return decision
        }
    }

    /// Deletes the account's total and the pair's failures.
    public func signInSucceeded(account: String, address: String) async throws {
        var statement = BoundStatement()
        try await run(Writes.clearSignInFailures(account: statement.bind(account), address: statement.bind(address)), statement, changing: [.all])
    }

    /// The account, if it exists.
    public func user(id: String) async throws -> UserRecord? {
        guard
            let row = try await rows(
                "SELECT \(unescaped: UserRecord.columns()) FROM users WHERE id = \(id)"
            ).first
        else { return nil }
        return try UserRecord(Columns(row))
    }

    /// Locks the sync state, then the wallet, in the order document writes and commands take them, so a
    /// deletion never deadlocks with one. Lists the account in the revocation feed in the same transaction.
    public func deleteUser(id: String) async throws -> Bool {
        try await transaction { connection in
            try await lockAccount(id, on: connection)
            return try await deleteAccount(id, on: connection)
        }
    }

    /// Locks the account's sync state, then its wallet, in the order document writes and commands take them.
    func lockAccount(_ id: String, on connection: PooledConnection) async throws {
        try await connection.rows("SELECT 1 FROM sync_state WHERE user_id = \(id) FOR UPDATE", logger: logger)
        try await connection.rows("SELECT 1 FROM wallets WHERE user_id = \(id) FOR UPDATE", logger: logger)
    }

    /// Deletes the account and everything that belongs to it (the guests merged into it too), listing it in the
    /// revocation feed, in the transaction of `connection` (which locked it: ``lockAccount(_:on:)``). Returns whether
    /// it existed; this process forgets its sessions and its account once that commits.
    func deleteAccount(_ id: String, on connection: PooledConnection) async throws -> Bool {
        var statement = BoundStatement()
        let deleted = try await run(Writes.deleteAccount(id: statement.bind(id)), statement, changing: [.user(id)], on: connection)
        return !deleted.isEmpty
    }
}
