import Foundation
import GRDB
import TallyStore

extension SQLiteStore: AccountCodeStore {
    /// Replaces the user's code of this purpose, in one writer transaction, if the user has an email.
    public func issueAccountCode(_ code: NewAccountCode, now: Date) async throws -> String? {
        try await write { db in
            guard let email = try db.fetchValue(String.self, sql: "SELECT email FROM users WHERE id = ?", arguments: [code.userId])
            else { return nil }
            try db.run(
                SQLiteWrites.issueAccountCode, changing: .user(code.userId),
                arguments: [code.userId, code.purpose.rawValue, code.hash, code.expiresAt.millis, now.millis])
            return email
        }
    }

    /// Redeems the reset code (``AccountCodePolicy``) and, in the same writer transaction, sets the password, marks
    /// the email verified, removes the Apple identity if the email was not verified before, and revokes every live
    /// session.
    public func resetPassword(userId: String, codeHash: String, passwordHash: String, policy: AccountCodePolicy, now: Date)
        async throws -> PasswordReset?
    {
        try await write { db in
            guard try self.redeem(db, userId: userId, purpose: .passwordReset, codeHash: codeHash, policy: policy, now: now),
                let account = try db.fetchRow(
                    sql: "SELECT email_verified_at, apple_sub FROM users WHERE id = ? AND email IS NOT NULL", arguments: [userId])
            else { return nil }
            let removeApple = (account["email_verified_at"] as Int64?) == nil && (account["apple_sub"] as String?) != nil
            try db.run(SQLiteWrites.resetPassword, changing: .user(userId), arguments: [passwordHash, now.millis, userId])
            if removeApple { try Self.unlinkApple(userId: userId, db) }
            return PasswordReset(
                revokedSessions: try self.revokeSessions(ofUser: userId, now: now, db), appleIdentityRemoved: removeApple)
        }
    }

    /// Redeems the verification code and marks the email verified, in one writer transaction.
    public func verifyEmail(userId: String, codeHash: String, policy: AccountCodePolicy, now: Date) async throws -> UserRecord? {
        try await write { db in
            guard try self.redeem(db, userId: userId, purpose: .emailVerification, codeHash: codeHash, policy: policy, now: now)
            else { return nil }
            try db.run(SQLiteWrites.verifyEmail, changing: .user(userId), arguments: [now.millis, userId])
            return try db.fetchRow(sql: "SELECT * FROM users WHERE id = ? AND email IS NOT NULL", arguments: [userId])
                .map(UserRecord.init(row:))
        }
    }

    /// Sets the password, revokes the other sessions and drops a pending reset code, in one writer transaction.
    public func changePassword(userId: String, passwordHash: String, keepingSession: String, now: Date) async throws -> [String] {
        try await write { db in
            try db.run(SQLiteWrites.changePassword, changing: .user(userId), arguments: [passwordHash, userId])
            guard db.changesCount == 1 else { throw StoreError(.userNotFound) }
            try db.run(
                SQLiteWrites.deleteAccountCode, changing: .user(userId), arguments: [userId, AccountCodePurpose.passwordReset.rawValue])
            return try self.revokeSessions(ofUser: userId, keeping: keepingSession, now: now, db)
        }
    }

    /// Applies the policy's verdict on the presented code to the stored one; whether it was redeemed (and deleted).
    private func redeem(
        _ db: Database, userId: String, purpose: AccountCodePurpose, codeHash: String, policy: AccountCodePolicy, now: Date
    ) throws -> Bool {
        let key: StatementArguments = [userId, purpose.rawValue]
        let stored = try db.fetchRow(
            sql: "SELECT code_hash, expires_at, failed_attempts FROM account_codes WHERE user_id = ? AND purpose = ?", arguments: key
        ).map { row in
            StoredAccountCode(hash: row["code_hash"], expiresAt: Date(millis: row["expires_at"]), failedAttempts: row["failed_attempts"])
        }
        switch policy.check(stored, presented: codeHash, now: now) {
        case .redeem:
            try db.run(SQLiteWrites.deleteAccountCode, changing: .user(userId), arguments: key)
            return true
        case .wrong(let failed):
            try db.run(SQLiteWrites.countWrongCode, changing: .user(userId), arguments: [failed, userId, purpose.rawValue])
            return false
        case .discard:
            try db.run(SQLiteWrites.deleteAccountCode, changing: .user(userId), arguments: key)
            return false
        case .absent:
            return false
        }
    }
}
