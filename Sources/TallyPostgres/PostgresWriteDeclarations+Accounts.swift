import Foundation
import TallyStore

// The writes of account codes, Apple identities, the console and guest merges (see ``Writes``).
extension Writes {
    // MARK: Account codes

    /// The user's code of a purpose replaced, if the user has an email; returns the email.
    static func issueAccountCode(
        userId: SQLParam, purpose: SQLParam, hash: SQLParam, expiresAt: SQLParam, now: SQLParam
    ) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .accountCodes,
                sql: """
                    WITH account AS (
                      SELECT id, email FROM users WHERE id = \(userId) AND email IS NOT NULL
                    ), code AS (
                      INSERT INTO account_codes (user_id, purpose, code_hash, expires_at, failed_attempts, created_at)
                      SELECT id, \(purpose), \(hash), \(expiresAt), 0, \(now) FROM account
                      ON CONFLICT (user_id, purpose) DO UPDATE SET code_hash = excluded.code_hash, expires_at = excluded.expires_at,
                        failed_attempts = 0, created_at = excluded.created_at
                    )
                    SELECT email FROM account
                    """))
    }

    /// A redeemed reset code's account: the password set, the email verified, an Apple identity removed if the email
    /// was not verified before, and every live session revoked and listed in the revocation feed.
    static func resetPassword(userId: SQLParam, passwordHash: SQLParam, now: SQLParam) -> PostgresWrite {
        let revoke = revokeLive(sessions: "user_id IN (SELECT id FROM account)", now: now)
        return PostgresWrite(
            StoreWrite(
                .users,
                sql: """
                    WITH before AS (
                      SELECT email_verified_at IS NULL AND apple_sub IS NOT NULL AS remove_apple FROM users WHERE id = \(userId)
                    ), account AS (
                      UPDATE users SET password_hash = \(passwordHash), email_verified_at = coalesce(email_verified_at, \(now)),
                        apple_sub = CASE WHEN email_verified_at IS NULL THEN NULL ELSE apple_sub END,
                        apple_email = CASE WHEN email_verified_at IS NULL THEN NULL ELSE apple_email END,
                        apple_refresh_token = CASE WHEN email_verified_at IS NULL THEN NULL ELSE apple_refresh_token END,
                        apple_linked_at = CASE WHEN email_verified_at IS NULL THEN NULL ELSE apple_linked_at END,
                        apple_consent_revoked_at = CASE WHEN email_verified_at IS NULL THEN NULL ELSE apple_consent_revoked_at END
                      WHERE id = \(userId) AND email IS NOT NULL RETURNING id
                    ), \(revoke.sql)
                    SELECT (SELECT remove_apple FROM before) AS remove_apple, ARRAY(SELECT id FROM revoked) AS revoked FROM account
                    """), with: [revoke])
    }

    /// The email marked verified; returns the account.
    static func verifyEmail(userId: SQLParam, now: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .users,
                sql: """
                    UPDATE users SET email_verified_at = coalesce(email_verified_at, \(now))
                    WHERE id = \(userId) AND email IS NOT NULL
                    RETURNING \(UserRecord.columns())
                    """))
    }

    /// The password set, a pending reset code dropped and the other sessions revoked and listed in the revocation feed.
    static func changePassword(userId: SQLParam, passwordHash: SQLParam, purpose: SQLParam, keeping: SQLParam, now: SQLParam)
        -> PostgresWrite
    {
        let revoke = revokeLive(sessions: "user_id IN (SELECT id FROM account) AND id <> \(keeping)", now: now)
        return PostgresWrite(
            StoreWrite(
                .users, .accountCodes,
                sql: """
                    WITH account AS (
                      UPDATE users SET password_hash = \(passwordHash) WHERE id = \(userId) AND email IS NOT NULL RETURNING id
                    ), reset_code AS (
                      DELETE FROM account_codes WHERE user_id = (SELECT id FROM account) AND purpose = \(purpose)
                    ), \(revoke.sql)
                    SELECT (SELECT count(*) FROM account) AS changed, ARRAY(SELECT id FROM revoked) AS revoked
                    """), with: [revoke])
    }

    /// A code redeemed or discarded.
    static func deleteAccountCode(userId: SQLParam, purpose: SQLParam) -> PostgresWrite {
        PostgresWrite(StoreWrite(.accountCodes, sql: "DELETE FROM account_codes WHERE user_id = \(userId) AND purpose = \(purpose)"))
    }

    /// A wrong code counted.
    static func countWrongCode(userId: SQLParam, purpose: SQLParam, failed: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .accountCodes,
                sql: "UPDATE account_codes SET failed_attempts = \(failed) WHERE user_id = \(userId) AND purpose = \(purpose)"))
    }

    // MARK: Apple identities

    /// An Apple token's use inserted, or found taken; a row when this use took it.
    static func useAppleToken(subject: SQLParam, digest: SQLParam, expiresAt: SQLParam, mergingGuest: SQLParam, now: SQLParam)
        -> PostgresWrite
    {
        PostgresWrite(
            StoreWrite(
                .appleTokenUses,
                sql: """
                    INSERT INTO apple_token_uses (subject, digest, expires_at, merging_guest, used_at)
                    VALUES (\(subject), \(digest), \(expiresAt), \(mergingGuest)::TEXT, \(now))
                    ON CONFLICT (subject, digest) DO UPDATE SET used_at = apple_token_uses.used_at
                    WHERE apple_token_uses.merging_guest = excluded.merging_guest
                    RETURNING 1
                    """))
    }

    /// The account's wallet row rewritten unchanged (so an action planned before fails its compare-and-set).
    static func touchWallet(userId: SQLParam) -> PostgresWrite {
        PostgresWrite(StoreWrite(.wallets, sql: "UPDATE wallets SET version = version WHERE user_id = \(userId) RETURNING user_id"))
    }

    /// An Apple identity linked to an account without one, detached from its installation; returns the account.
    static func linkApple(userId: SQLParam, subject: SQLParam, email: SQLParam, refreshToken: SQLParam, now: SQLParam)
        -> PostgresWrite
    {
        PostgresWrite(
            StoreWrite(
                .users,
                sql: """
                    UPDATE users SET apple_sub = \(subject), apple_email = \(email),
                      apple_refresh_token = \(refreshToken), apple_linked_at = \(now), installation = NULL
                    WHERE id = \(userId) AND apple_sub IS NULL
                    RETURNING \(UserRecord.columns())
                    """))
    }

    /// An Apple consent revoked (if linked by the event and not revoked yet), the account's live sessions revoked and
    /// listed in the revocation feed; returns the account's id and the sessions'.
    static func revokeAppleConsent(subject: SQLParam, eventTime: SQLParam, now: SQLParam) -> PostgresWrite {
        let revoke = revokeLive(sessions: "user_id IN (SELECT id FROM account)", now: now)
        return PostgresWrite(
            StoreWrite(
                .users,
                sql: """
                    WITH account AS (
                      UPDATE users SET apple_consent_revoked_at = \(eventTime), apple_refresh_token = NULL
                      WHERE apple_sub = \(subject) AND apple_linked_at <= \(eventTime) AND apple_consent_revoked_at IS NULL
                      RETURNING id
                    ), \(revoke.sql)
                    SELECT id, ARRAY(SELECT id FROM revoked ORDER BY id) AS revoked FROM account
                    """), with: [revoke])
    }

    /// A batch of expired token uses and of notices past their keeping deleted.
    static func purgeAppleRecords(now: SQLParam, limit: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .appleTokenUses, .appleNotifications,
                sql: """
                    WITH uses AS (
                      DELETE FROM apple_token_uses WHERE (subject, digest) IN (
                        SELECT subject, digest FROM apple_token_uses WHERE expires_at < \(now) LIMIT \(limit)
                      ) RETURNING 1
                    ), notices AS (
                      DELETE FROM apple_notifications WHERE jti IN (
                        SELECT jti FROM apple_notifications WHERE keep_until < \(now) LIMIT \(limit)
                      ) RETURNING 1
                    )
                    SELECT (SELECT count(*) FROM uses) + (SELECT count(*) FROM notices) AS purged
                    """))
    }

    /// The contact of the `sub`'s account replaced where the credential has it, a revoked consent given again; returns
    /// the account's id.
    static func storeAppleContact(subject: SQLParam, email: SQLParam, refreshToken: SQLParam, now: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .users,
                sql: """
                    UPDATE users SET apple_email = coalesce(\(email), apple_email),
                      apple_refresh_token = coalesce(\(refreshToken), apple_refresh_token),
                      apple_linked_at = CASE WHEN apple_consent_revoked_at IS NULL THEN apple_linked_at ELSE \(now) END,
                      apple_consent_revoked_at = NULL
                    WHERE apple_sub = \(subject)
                    RETURNING id
                    """))
    }

    /// A server notice's id recorded; a row the first time.
    static func takeAppleNotice(id: SQLParam, keepUntil: SQLParam, now: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .appleNotifications,
                sql: """
                    INSERT INTO apple_notifications (jti, keep_until, received_at) VALUES (\(id), \(keepUntil), \(now))
                    ON CONFLICT (jti) DO NOTHING RETURNING 1
                    """))
    }

    /// The account's Apple identity cleared.
    static func unlinkApple(userId: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .users,
                sql: """
                    UPDATE users SET apple_sub = NULL, apple_email = NULL, apple_refresh_token = NULL, apple_linked_at = NULL,
                      apple_consent_revoked_at = NULL
                    WHERE id = \(userId)
                    """))
    }

    // MARK: The console

    /// One audit row (returning it when `returning`).
    static func insertAudit(
        at: SQLParam, operatorSession: SQLParam, action: SQLParam, userId: SQLParam, before: SQLParam, after: SQLParam,
        returning: Bool
    ) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .consoleAudit,
                sql: """
                    INSERT INTO console_audit (at, operator_session, action, user_id, before, after)
                    VALUES (\(at), \(operatorSession), \(action), \(userId), \(before), \(after))
                    \(returning ? "RETURNING \(AuditEntry.columns)" : "")
                    """))
    }

    /// Every live session of the account revoked and listed in the revocation feed, with the audit row; returns the ids.
    static func consoleRevokeSessions(
        userId: SQLParam, at: SQLParam, operatorSession: SQLParam, action: SQLParam, auditUserId: SQLParam, before: SQLParam,
        after: SQLParam
    ) -> PostgresWrite {
        let revoke = revokeLive(sessions: "user_id = \(userId)", now: at)
        return PostgresWrite(
            StoreWrite(
                .consoleAudit,
                sql: """
                    WITH \(revoke.sql), audit AS (
                      INSERT INTO console_audit (at, operator_session, action, user_id, before, after)
                      VALUES (\(at), \(operatorSession), \(action), \(auditUserId), \(before), \(after))
                    )
                    SELECT id FROM revoked ORDER BY id
                    """), with: [revoke])
    }

    // MARK: Guest merges

    /// Locks the user's `sync_state` row, creating it on the user's first write: `WHERE false` updates nothing, but the
    /// conflicting row is locked all the same. No row: the user does not exist. (``SyncStateLockStatement``.)
    static let lockSyncState = PostgresWrite(
        StoreWrite(
            .syncState,
            sql: """
                INSERT INTO sync_state (user_id, version, purged_through) SELECT id, 0, 0 FROM users WHERE id = $1::TEXT
                ON CONFLICT (user_id) DO UPDATE SET version = sync_state.version WHERE false
                """), name: "lockSyncState")

    /// The merge's holds released (settled as `status`) or carried over and both wallets moved by the entries of the
    /// relation `source`.
    static func mergeLedger(
        source: String, released: SQLParam, status: SQLParam, carried: SQLParam, guest: SQLParam, account: SQLParam, settledAt: SQLParam
    ) -> PostgresWrite {
        let settle = settleHolds(ids: released, status: status, settledAt: settledAt)
        let append = append(from: "b")
        return PostgresWrite(
            StoreWrite(
                .holds,
                sql: """
                    WITH \(settle.sql), carried AS (
                      UPDATE holds SET user_id = \(account)::TEXT
                      WHERE id = ANY(\(carried)::TEXT[]) AND user_id = \(guest)::TEXT AND status = 'open'
                      RETURNING 1
                    ), b AS (\(source)), \(append.sql)
                    SELECT (SELECT count(*) FROM settled) AS released, (SELECT count(*) FROM carried) AS carried,
                           (SELECT count(*) FROM moved) AS moved
                    """), with: [settle, append])
    }

    /// The merge's account rows: the guest marked merged, the account's premium, purchases, subscriptions and sync
    /// clients moved to the account, the counters (`quotas`, `used`, `windowEnds`) stored for it.
    static func mergeAccounts(
        guest: SQLParam, account: SQLParam, purchasedPremiumUntil: SQLParam, premiumUntil: SQLParam, quotas: SQLParam,
        used: SQLParam, windowEnds: SQLParam
    ) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .users, .purchases, .subscriptions, .syncClients, .quotaCounters,
                sql: """
                    WITH guest AS (
                      UPDATE users SET installation = NULL, merged_into = \(account), purchased_premium_until = NULL WHERE id = \(guest)
                    ), account AS (
                      UPDATE users SET purchased_premium_until = \(purchasedPremiumUntil)::BIGINT,
                        premium_until = \(premiumUntil)::BIGINT
                      WHERE id = \(account)
                    ), listed AS (
                      -- A subscription both list is listed once: the account's row stays.
                      DELETE FROM purchases WHERE user_id = \(guest) AND kind = 'subscription' AND original_transaction_id IN (
                        SELECT original_transaction_id FROM purchases WHERE user_id = \(account) AND kind = 'subscription')
                      RETURNING original_transaction_id
                    ), purchases AS (
                      UPDATE purchases SET user_id = \(account)
                      WHERE user_id = \(guest) AND (kind = 'consumable' OR original_transaction_id NOT IN (SELECT original_transaction_id FROM listed))
                    ), subscriptions AS (
                      UPDATE subscriptions SET user_id = \(account) WHERE user_id = \(guest)
                    ), clients AS (
                      UPDATE sync_clients SET user_id = \(account) WHERE user_id = \(guest)
                    )
                    INSERT INTO quota_counters AS c (user_id, quota, used, window_end)
                    SELECT \(account), q.quota, q.used, q.window_end
                    FROM unnest(\(quotas)::TEXT[], \(used)::BIGINT[], \(windowEnds)::BIGINT[]) AS q(quota, used, window_end)
                    ON CONFLICT (user_id, quota) DO UPDATE SET used = excluded.used, window_end = excluded.window_end
                    """))
    }

    /// The guest's documents written into the account (where it has no row, or over a tombstone) and deleted from the
    /// guest; returns how many were written.
    static func mergeDocuments(
        guest: SQLParam, account: SQLParam, collections: SQLParam, ids: SQLParam, data: SQLParam, rangeValues: SQLParam,
        hasRanges: SQLParam, versions: SQLParam, now: SQLParam
    ) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .documents,
                sql: """
                    WITH b AS (
                      SELECT * FROM unnest(
                        \(collections)::TEXT[], \(ids)::TEXT[], \(data)::TEXT[], \(rangeValues)::TEXT[], \(hasRanges)::BOOLEAN[],
                        \(versions)::BIGINT[]
                      ) AS b(collection, id, data, range_value, has_range, version)
                    ), written AS (
                      -- Where the account has no row, or over a tombstone: never over a live document.
                      INSERT INTO documents AS d (user_id, collection, id, data, range_value, version, updated_at, deleted)
                      SELECT \(account), b.collection, b.id, b.data, CASE WHEN b.has_range THEN b.range_value END, b.version,
                             \(now), false
                      FROM b
                      ON CONFLICT (user_id, collection, id) DO UPDATE
                      SET data = excluded.data, range_value = excluded.range_value, version = excluded.version,
                          updated_at = excluded.updated_at, deleted = false
                      WHERE d.deleted
                      RETURNING 1
                    ), gone AS (
                      DELETE FROM documents WHERE user_id = \(guest)
                    )
                    SELECT count(*) AS written FROM written
                    """))
    }

    /// A merged user's sync counters.
    static func mergeSyncState(userId: SQLParam, version: SQLParam, purgedThrough: SQLParam, documents: SQLParam, bytes: SQLParam)
        -> PostgresWrite
    {
        PostgresWrite(
            StoreWrite(
                .syncState,
                sql: """
                    UPDATE sync_state SET version = \(version), purged_through = \(purgedThrough),
                      stored_documents = \(documents), stored_bytes = \(bytes)
                    WHERE user_id = \(userId)
                    """))
    }

    /// The guest's live sessions revoked and listed in the revocation feed, and the merge recorded; returns the ids.
    static func mergeRevoke(guest: SQLParam, account: SQLParam, summary: SQLParam, now: SQLParam) -> PostgresWrite {
        let revoke = revokeLive(sessions: "user_id = \(guest)", now: now)
        return PostgresWrite(
            StoreWrite(
                .merges,
                sql: """
                    WITH \(revoke.sql), merged AS (
                      INSERT INTO merges (guest_id, account_id, summary, merged_at)
                      VALUES (\(guest), \(account), \(summary), \(now))
                    )
                    SELECT id FROM revoked
                    """), with: [revoke])
    }
}
