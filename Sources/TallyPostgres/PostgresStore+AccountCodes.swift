import Foundation
import Logging
import PostgresNIO
import TallyStore

extension PostgresStore {
    /// One statement replaces the user's code of this purpose, if the user has an email.
    public func issueAccountCode(_ code: NewAccountCode, now: Date) async throws -> String? {
        var statement = BoundStatement()
        let write = Writes.issueAccountCode(
            userId: statement.bind(code.userId), purpose: statement.bind(code.purpose.rawValue), hash: statement.bind(code.hash),
            expiresAt: statement.bind(code.expiresAt.millis), now: statement.bind(now.millis))
        let rows = try await run(write, statement, changing: [.user(code.userId)])
        guard let row = rows.first.map(Columns.init) else { return nil }
        return try row["email"]
    }

    /// Redeems the reset code under the user's and the code's row locks (``redeem(_:userId:purpose:codeHash:policy:now:)``)
    /// and, in the same transaction, sets the password, marks the email verified, removes the Apple identity if the
    /// email was not verified before, and revokes every live session (listed in the revocation feed). This process
    /// forgets the sessions once that commits; the caller announces them to the others.
    public func resetPassword(userId: String, codeHash: String, passwordHash: String, policy: AccountCodePolicy, now: Date)
        async throws -> PasswordReset?
    {
        let reset = try await transaction { connection -> PasswordReset? in
            guard try await redeem(connection, userId: userId, purpose: .passwordReset, codeHash: codeHash, policy: policy, now: now)
            else { return nil }
            // `before` reads the row as the code's redemption locked it; the update's own expressions read it too.
            var statement = BoundStatement()
            let write = Writes.resetPassword(
                userId: statement.bind(userId), passwordHash: statement.bind(passwordHash), now: statement.bind(now.millis))
            let rows = try await run(write, statement, changing: [.user(userId)], on: connection)
            guard let row = rows.first.map(Columns.init) else { return nil }
            return PasswordReset(revokedSessions: try row["revoked"], appleIdentityRemoved: try row["remove_apple"])
        }
        return reset
    }

    /// Redeems the verification code and marks the email verified, in one transaction.
    public func verifyEmail(userId: String, codeHash: String, policy: AccountCodePolicy, now: Date) async throws -> UserRecord? {
        try await transaction { connection -> UserRecord? in
            guard try await redeem(connection, userId: userId, purpose: .emailVerification, codeHash: codeHash, policy: policy, now: now)
            else { return nil }
            var statement = BoundStatement()
            let write = Writes.verifyEmail(userId: statement.bind(userId), now: statement.bind(now.millis))
            let rows = try await run(write, statement, changing: [.user(userId)], on: connection)
            return try rows.first.map { try UserRecord(Columns($0)) }
        }
    }

    /// One statement sets the password, drops a pending reset code and revokes the other sessions (listed in the
    /// revocation feed); this process forgets them once that returns (committed).
    public func changePassword(userId: String, passwordHash: String, keepingSession: String, now: Date) async throws -> [String] {
        var statement = BoundStatement()
        let write = Writes.changePassword(
            userId: statement.bind(userId), passwordHash: statement.bind(passwordHash),
            purpose: statement.bind(AccountCodePurpose.passwordReset.rawValue), keeping: statement.bind(keepingSession),
            now: statement.bind(now.millis))
        let rows = try await run(write, statement, changing: [.user(userId)])
        let row = try Self.single(rows, "the password change")
        guard try row["changed"] == Int64(1) else { throw StoreError(.userNotFound) }
        return try row["revoked"]
    }

    /// Locks the user's row, then the code's, reads the code and applies the policy's verdict; whether the code was
    /// redeemed (and deleted). The user's row first, as an account's deletion takes it before the code's (its cascade),
    /// so the two never wait for each other in opposite orders.
    private func redeem(
        _ connection: PooledConnection, userId: String, purpose: AccountCodePurpose, codeHash: String, policy: AccountCodePolicy,
        now: Date
    ) async throws -> Bool {
        let rows = try await connection.rows(
            """
            SELECT c.code_hash, c.expires_at, c.failed_attempts
            FROM users u JOIN account_codes c ON c.user_id = u.id AND c.purpose = \(purpose.rawValue)
            WHERE u.id = \(userId)
            FOR NO KEY UPDATE OF u FOR UPDATE OF c
            """, logger: logger)
        let stored = try rows.first.map(Columns.init).map { row in
            let expiresAt: Int64 = try row["expires_at"]
            let failed: Int32 = try row["failed_attempts"]
            return StoredAccountCode(hash: try row["code_hash"], expiresAt: Date(millis: expiresAt), failedAttempts: Int(failed))
        }
        let verdict = policy.check(stored, presented: codeHash, now: now)
        switch verdict {
        case .redeem, .discard:
            var statement = BoundStatement()
            let write = Writes.deleteAccountCode(userId: statement.bind(userId), purpose: statement.bind(purpose.rawValue))
            try await run(write, statement, changing: [.user(userId)], on: connection)
            return verdict == .redeem
        case .wrong(let failed):
            var statement = BoundStatement()
            let write = Writes.countWrongCode(
                userId: statement.bind(userId), purpose: statement.bind(purpose.rawValue), failed: statement.bind(Int32(failed)))
            try await run(write, statement, changing: [.user(userId)], on: connection)
            return false
        case .absent:
            return false
        }
    }
}
