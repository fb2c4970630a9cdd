import Foundation
import Logging
import PostgresNIO
import TallyStore

extension PostgresStore {
    /// One statement replaces the user's code of this purpose, if the user has an email.
    public func issueAccountCode(_ code: NewAccountCode, now: Date) async throws -> String? {
        let rows = try await rows(
            """
            WITH account AS (
              SELECT id, email FROM users WHERE id = \(code.userId) AND email IS NOT NULL
            ), code AS (
              INSERT INTO account_codes (user_id, purpose, code_hash, expires_at, failed_attempts, created_at)
              SELECT id, \(code.purpose.rawValue), \(code.hash), \(code.expiresAt.millis), 0, \(now.millis) FROM account
              ON CONFLICT (user_id, purpose) DO UPDATE SET code_hash = excluded.code_hash, expires_at = excluded.expires_at,
                failed_attempts = 0, created_at = excluded.created_at
            )
            SELECT email FROM account
            """)
        guard let row = rows.first.map(Columns.init) else { return nil }
        return try row["email"]
    }

    /// Redeems the reset code under the user's and the code's row locks (``redeem(_:userId:purpose:codeHash:policy:now:)``)
    /// and, in the same transaction, sets the password, marks the email verified, removes the Apple identity if the
    /// email was not verified before, and revokes every live session (listed in the revocation feed). This process
    /// forgets the sessions at once; the caller announces them to the others.
    public func resetPassword(userId: String, codeHash: String, passwordHash: String, policy: AccountCodePolicy, now: Date)
        async throws -> PasswordReset?
    {
        let reset = try await transaction { connection -> PasswordReset? in
            guard try await redeem(connection, userId: userId, purpose: .passwordReset, codeHash: codeHash, policy: policy, now: now)
            else { return nil }
            // `before` reads the row as the code's redemption locked it; the update's own expressions read it too.
            let rows = try await connection.rows(
                """
                WITH before AS (
                  SELECT email_verified_at IS NULL AND apple_sub IS NOT NULL AS remove_apple FROM users WHERE id = \(userId)
                ), account AS (
                  UPDATE users SET password_hash = \(passwordHash), email_verified_at = coalesce(email_verified_at, \(now.millis)),
                    apple_sub = CASE WHEN email_verified_at IS NULL THEN NULL ELSE apple_sub END,
                    apple_email = CASE WHEN email_verified_at IS NULL THEN NULL ELSE apple_email END,
                    apple_refresh_token = CASE WHEN email_verified_at IS NULL THEN NULL ELSE apple_refresh_token END,
                    apple_linked_at = CASE WHEN email_verified_at IS NULL THEN NULL ELSE apple_linked_at END,
                    apple_consent_revoked_at = CASE WHEN email_verified_at IS NULL THEN NULL ELSE apple_consent_revoked_at END
                  WHERE id = \(userId) AND email IS NOT NULL RETURNING id
                ), revoked AS (
                  UPDATE sessions SET revoked_at = \(now.millis)
                  WHERE user_id IN (SELECT id FROM account) AND revoked_at IS NULL RETURNING id, user_id
                ), feed AS (
                  INSERT INTO session_revocations (session_id, user_id) SELECT id, user_id FROM revoked
                )
                SELECT (SELECT remove_apple FROM before) AS remove_apple, ARRAY(SELECT id FROM revoked) AS revoked FROM account
                """, logger: logger)
            guard let row = rows.first.map(Columns.init) else { return nil }
            return PasswordReset(revokedSessions: try row["revoked"], appleIdentityRemoved: try row["remove_apple"])
        }
        for id in reset?.revokedSessions ?? [] { sessions.forget(sessionId: id) }
        return reset
    }

    /// Redeems the verification code and marks the email verified, in one transaction.
    public func verifyEmail(userId: String, codeHash: String, policy: AccountCodePolicy, now: Date) async throws -> UserRecord? {
        try await transaction { connection -> UserRecord? in
            guard try await redeem(connection, userId: userId, purpose: .emailVerification, codeHash: codeHash, policy: policy, now: now)
            else { return nil }
            let rows = try await connection.rows(
                """
                UPDATE users SET email_verified_at = coalesce(email_verified_at, \(now.millis))
                WHERE id = \(userId) AND email IS NOT NULL
                RETURNING \(unescaped: UserRecord.columns())
                """, logger: logger)
            return try rows.first.map { try UserRecord(Columns($0)) }
        }
    }

    /// One statement sets the password, drops a pending reset code and revokes the other sessions (listed in the
    /// revocation feed); this process forgets them at once.
    public func changePassword(userId: String, passwordHash: String, keepingSession: String, now: Date) async throws -> [String] {
        let rows = try await rows(
            """
            WITH account AS (
              UPDATE users SET password_hash = \(passwordHash) WHERE id = \(userId) AND email IS NOT NULL RETURNING id
            ), reset_code AS (
              DELETE FROM account_codes WHERE user_id = (SELECT id FROM account) AND purpose = \(AccountCodePurpose.passwordReset.rawValue)
            ), revoked AS (
              UPDATE sessions SET revoked_at = \(now.millis)
              WHERE user_id IN (SELECT id FROM account) AND revoked_at IS NULL AND id <> \(keepingSession) RETURNING id, user_id
            ), feed AS (
              INSERT INTO session_revocations (session_id, user_id) SELECT id, user_id FROM revoked
            )
            SELECT (SELECT count(*) FROM account) AS changed, ARRAY(SELECT id FROM revoked) AS revoked
            """)
        let row = try Self.single(rows, "the password change")
        guard try row["changed"] == Int64(1) else { throw StoreError(.userNotFound) }
        let revoked: [String] = try row["revoked"]
        for id in revoked { sessions.forget(sessionId: id) }
        return revoked
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
            try await connection.rows(
                "DELETE FROM account_codes WHERE user_id = \(userId) AND purpose = \(purpose.rawValue)", logger: logger)
            return verdict == .redeem
        case .wrong(let failed):
            try await connection.rows(
                """
                UPDATE account_codes SET failed_attempts = \(Int32(failed)) WHERE user_id = \(userId) AND purpose = \(purpose.rawValue)
                """, logger: logger)
            return false
        case .absent:
            return false
        }
    }
}
