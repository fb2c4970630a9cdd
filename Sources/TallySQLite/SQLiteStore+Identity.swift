import Foundation
import GRDB
import TallyStore

extension SQLiteStore: IdentityStore {
    /// Finds or creates the guest of an installation (a device hash) and opens a session (see ``IdentityStore``).
    public func signInGuest(
        deviceHash: String, ipHash: String, signupsPerHour: Int, signupGrant: Int64, sessionId: String,
        refresh: NewRefreshToken, sessionsPerUser: Int, now: Date
    ) async throws -> SessionGrant {
        try await writeSession { db in
            var created = false
            let existing = try db.fetchRow(sql: "SELECT * FROM users WHERE installation = ?", arguments: [deviceHash])
            let user: UserRecord
            if let existing {
                user = UserRecord(row: existing)
            } else {
                let recent = try db.fetchRow(sql: "SELECT count(*) AS n, min(created_at) AS oldest FROM guest_signups WHERE ip_hash = ? AND created_at > ?",
                    arguments: [ipHash, GuestSignup.windowStart(now: now).millis])
                try GuestSignup.admit(
                    count: recent?["n"] ?? 0, oldest: (recent?["oldest"] as Int64?).map(Date.init(millis:)), perHour: signupsPerHour,
                    now: now)
                user = GuestSignup.newGuest(now: now)
                try db.run(SQLiteWrites.recordInstallation, changing: .all, arguments: [deviceHash, now.millis])
                try db.run(SQLiteWrites.createGuest, changing: .user(user.id), arguments: [user.id, now.millis, deviceHash])
                try db.run(SQLiteWrites.createWallet, changing: .user(user.id), arguments: [user.id])
                try db.run(SQLiteWrites.recordGuestSignup, changing: .all, arguments: [ipHash, now.millis])
                if let grant = GuestSignup.grant(signupGrant) { try self.append(grant, userId: user.id, from: .empty, now: now, db) }
                created = true
            }
            try self.insertSession(db, userId: user.id, sessionId: sessionId, refresh: refresh, limit: sessionsPerUser, now: now)
            return SessionGrant(user: user, sessionId: sessionId, created: created)
        }
    }

    /// A write that opens or renews a session, which is then kept in the cache as live: every new
    /// session's first request would otherwise look it up on a reader (10,000 of them at the start of a
    /// load run). It is stored on the writer's thread right after the commit has made the caches forget what it
    /// changed (the new session's row among them), so before any later revocation can commit.
    func writeSession(_ open: @Sendable @escaping (Database) throws -> SessionGrant) async throws -> SessionGrant {
        try await write(open) { grant in self.sessions.storeCommitted(grant.user.id, for: grant.sessionId) }
    }

    /// Opens a session for an existing account.
    public func openSession(
        userId: String, sessionId: String, refresh: NewRefreshToken, sessionsPerUser: Int, now: Date
    ) async throws -> SessionGrant {
        try await writeSession { db in
            guard let row = try db.fetchRow(sql: "SELECT * FROM users WHERE id = ?", arguments: [userId]) else {
                throw StoreError(.userNotFound)
            }
            try self.insertSession(db, userId: userId, sessionId: sessionId, refresh: refresh, limit: sessionsPerUser, now: now)
            return SessionGrant(user: UserRecord(row: row), sessionId: sessionId, created: false)
        }
    }

    /// Exchanges a refresh token for the next one; a reused one revokes its session.
    public func rotateRefreshToken(hash: String, next: NewRefreshToken, now: Date) async throws -> SessionGrant {
        // Reuse must revoke the session *and* report it, so the revocation commits before the error is thrown.
        let result: Result<SessionGrant, StoreError> = try await write { db in
            guard
                let token = try db.fetchRow(sql: """
                        SELECT r.session_id, r.expires_at, r.used_at, s.revoked_at, u.*
                        FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id JOIN users u ON u.id = s.user_id
                        WHERE r.token_hash = ?
                        """,
                    arguments: [hash])
            else { return .failure(StoreError(.invalidRefreshToken)) }
            let sessionId: String = token["session_id"]
            let presented = PresentedRefreshToken(
                sessionId: sessionId, expiresAt: Date(millis: token["expires_at"]), usedAt: (token["used_at"] as Int64?).map(Date.init(millis:)),
                sessionRevokedAt: (token["revoked_at"] as Int64?).map(Date.init(millis:)))
            // The rules are TallyStore's (``RefreshTokenPolicy``); the single writer makes read-then-write atomic.
            switch RefreshTokenPolicy.decide(presented, now: now) {
            case .rotate:
                break
            case .revokeSession:
                try db.run(SQLiteWrites.revokeSession, changing: .session(sessionId), arguments: [now.millis, sessionId])
                return .failure(StoreError(.refreshTokenReused))
            case .refuse:
                return .failure(StoreError(.invalidRefreshToken))
            }
            try db.run(SQLiteWrites.useRefreshToken, changing: .session(sessionId), arguments: [now.millis, hash])
            try db.run(
                SQLiteWrites.issueRefreshToken, changing: .session(sessionId), arguments: [next.hash, sessionId, next.expiresAt.millis])
            return .success(SessionGrant(user: UserRecord(row: token), sessionId: sessionId, created: false))
        }
        return try result.get()
    }

    /// Revokes a session and its refresh tokens.
    public func revokeSession(id: String, now: Date) async throws {
        try await write { db in
            try db.run(SQLiteWrites.revokeSession, changing: .session(id), arguments: [now.millis, id])
        }
    }

    /// The session of a refresh token, from a reader.
    public func refreshTokenSession(hash: String) async throws -> String? {
        try await read { db in
            try db.fetchValue(String.self, sql: "SELECT session_id FROM refresh_tokens WHERE token_hash = ?", arguments: [hash])
        }
    }

    /// From the session cache when it has the session (revocations forget it on commit); else a reader.
    public func liveSessionUser(sessionId: String) async throws -> String? {
        if let userId = sessions.value(sessionId) { return userId }
        let epoch = sessions.epoch
        let userId = try await read { db in
            try db.fetchValue(String.self, sql: "SELECT user_id FROM sessions WHERE id = ? AND revoked_at IS NULL", arguments: [sessionId])
        }
        if let userId { sessions.store(userId, for: sessionId, readAt: epoch) }
        return userId
    }

    /// Adds an email and password to a guest in place, and detaches it from its installation: the device
    /// secret no longer opens it (the schema's `CHECK` would refuse a linked account with an installation).
    public func linkCredentials(userId: String, email: String, passwordHash: String) async throws -> UserRecord {
        try await write { db in
            guard let row = try db.fetchRow(sql: "SELECT * FROM users WHERE id = ?", arguments: [userId]) else {
                throw StoreError(.userNotFound)
            }
            var user = UserRecord(row: row)
            guard user.email == nil else { throw StoreError(.alreadyLinked) }
            if try db.fetchValue(Bool.self, sql: "SELECT EXISTS (SELECT 1 FROM users WHERE email = ?)", arguments: [email]) == true {
                throw StoreError(.credentialInUse)
            }
            try db.run(SQLiteWrites.linkCredentials, changing: .user(userId), arguments: [email, passwordHash, userId])
            user.email = email
            return user
        }
    }

    /// The account and password hash for an email, if any.
    public func passwordHash(email: String) async throws -> (userId: String, passwordHash: String)? {
        let account = try await read { db -> [String]? in
            guard let row = try db.fetchRow(sql: "SELECT id, password_hash FROM users WHERE email = ?", arguments: [email]),
                let hash = row["password_hash"] as String?
            else { return nil }
            return [row["id"], hash]
        }
        return account.map { ($0[0], $0[1]) }
    }

    /// Reads the pair's and the account's failures, lets `policy` decide, and stores the counted attempt,
    /// in one writer transaction.
    public func beginSignIn(account: String, address: String, policy: SignInPolicy, now: Date) async throws -> SignInDecision {
        try await write { db in
            var pair: SignInFailures?
            var total: SignInFailures?
            let rows = try db.fetchRows(sql: """
                    SELECT address_key, failures, last_failure_at, locked_until FROM sign_in_failures
                    WHERE account_key = ? AND address_key IN ('', ?)
                    """,
                arguments: [account, address])
            for row in rows {
                let lockedUntil: Int64? = row["locked_until"]
                let failures = SignInFailures(
                    count: row["failures"], lastAt: Date(millis: row["last_failure_at"]), lockedUntil: lockedUntil.map(Date.init(millis:)))
                if (row["address_key"] as String).isEmpty { total = failures } else { pair = failures }
            }
            let decision = policy.decide(pair: pair, account: total, now: now)
            if case .admit(let pair, let total, _) = decision {
                for (key, failures) in [(address, pair), ("", total)] {
                    try db.run(
                        SQLiteWrites.storeSignInFailures, changing: .all,
                        arguments: [account, key, failures.count, failures.lastAt.millis, failures.lockedUntil?.millis])
                }
            }
            return decision
        }
    }

    /// Deletes the account's total and the pair's failures.
    public func signInSucceeded(account: String, address: String) async throws {
        try await write { db in
            try db.run(SQLiteWrites.clearSignInFailures, changing: .all, arguments: [account, address])
        }
    }

    /// The account, if it exists.
    public func user(id: String) async throws -> UserRecord? {
        try await read { db in
            try db.fetchRow(sql: "SELECT * FROM users WHERE id = ?", arguments: [id]).map(UserRecord.init(row:))
        }
    }

    /// Deletes the account and everything that belongs to it.
    public func deleteUser(id: String) async throws -> Bool {
        try await write { db in try self.deleteAccount(id, db) }
    }

    /// Deletes the account and everything that belongs to it (the guests merged into it too) in the caller's
    /// transaction; the caches forget them as that commits (the cascade changes the rows of the account and of
    /// every guest merged into it, directly or through another). Returns whether it existed.
    func deleteAccount(_ id: String, _ db: Database) throws -> Bool {
        let gone = try db.fetchValues(String.self, sql: """
                WITH RECURSIVE gone(id) AS (SELECT ? UNION SELECT u.id FROM users u JOIN gone g ON u.merged_into = g.id)
                SELECT id FROM gone
                """,
            arguments: [id])
        try db.run(SQLiteWrites.deleteAccountResponses, changing: .user(id), arguments: [id])
        try db.run(SQLiteWrites.deleteUser, changing: gone.map(ChangedRows.user), arguments: [id])
        return db.changesCount > 0
    }

    /// Revokes every live session of the account but `keeping` (`nil`: none kept) in the caller's transaction (the
    /// cache forgets them as it commits); returns their ids.
    func revokeSessions(ofUser userId: String, keeping: String? = nil, now: Date, _ db: Database) throws -> [String] {
        let ids = try db.fetchValues(
            String.self, sql: "SELECT id FROM sessions WHERE user_id = ? AND revoked_at IS NULL AND id IS NOT ? ORDER BY id",
            arguments: [userId, keeping])
        try db.run(SQLiteWrites.revokeSessionsOfUser, changing: ids.map(ChangedRows.session), arguments: [now.millis, userId, keeping])
        return ids
    }

    /// Inserts the session and its first refresh token, then revokes the account's oldest live sessions beyond
    /// `limit`, the new one counted and never among them: the others but the newest ``SessionCap/othersKept(limit:)``
    /// in the order of ``SessionCap/newestFirst`` (TallyStore's rule, PostgreSQL's too).
    func insertSession(_ db: Database, userId: String, sessionId: String, refresh: NewRefreshToken, limit: Int, now: Date) throws {
        try db.run(SQLiteWrites.openSession, changing: .session(sessionId), arguments: [sessionId, userId, now.millis])
        try db.run(
            SQLiteWrites.issueRefreshToken, changing: .session(sessionId), arguments: [refresh.hash, sessionId, refresh.expiresAt.millis])
        let excess = try db.fetchValues(String.self, sql: """
                SELECT id FROM sessions WHERE user_id = ? AND revoked_at IS NULL AND id <> ?
                ORDER BY \(SessionCap.newestFirst) LIMIT -1 OFFSET ?
                """,
            arguments: [userId, sessionId, SessionCap.othersKept(limit: limit)])
        for id in excess {
            try db.run(SQLiteWrites.revokeSession, changing: .session(id), arguments: [now.millis, id])
        }
    }
}
