import Foundation
import TallyStore

/// Every write statement of the PostgreSQL store, each declared once with the tables its text changes (``StoreWrite``):
/// the one place that says what a statement touches. This file has the ledger's statements and the sessions' (with the
/// fragment every revocation of live sessions composes, ``revokeLive(sessions:now:)``); the
/// `PostgresWriteDeclarations+*.swift` files the others, by area; the ledger's two fragments
/// (``append(from:carrying:)``, ``remember(from:)``) are declared in `PostgresLedger.swift`, the ledger's one place. Outside the migrations (`PostgresSchema*.swift`) no
/// `INSERT`, `UPDATE` or `DELETE` text is written anywhere else (`WriteDeclarationTests` reads the sources for it).
///
/// - A text without values is a `static let`; one built with values is a `static func` that takes them as placeholders
///   (``SQLParam``, bound by the caller's ``BoundStatement``), so the literal with its `\(…)` sits inside the
///   `StoreWrite(` call and no value reaches it. Callers run ``PostgresWrite/sql`` with that statement.
/// - A fragment interpolated into other statements (``append(from:carrying:)``, ``remember(from:)``,
///   ``revokeLive(sessions:now:)``) is a declaration of its own, named by the statements that interpolate it (`with:`),
///   which thereby change its tables too.
/// - Running a declaration notes the rows it changed (``PostgresStore/run(_:_:changing:on:)``,
///   ``PostgresStore/note(_:_:on:)``); this process's caches forget them when the transaction commits.
enum Writes {
    // MARK: The ledger

    /// A response stored alone under its key (``PostgresStore/remember(_:now:on:)``), from the relation `source`.
    static func rememberAlone(source: String) -> PostgresWrite {
        let remember = remember(from: "k")
        return PostgresWrite(
            StoreWrite(sql: "WITH k AS (\(source)), \(remember.sql) SELECT count(*) AS remembered FROM remembered"), with: [remember])
    }

    /// A wallet moved by the entries of the relation `source` alone: a guest's sign-up grant.
    static func ledgerMove(source: String) -> PostgresWrite {
        let append = append(from: "b")
        return PostgresWrite(
            StoreWrite(sql: "WITH b AS (\(source)), \(append.sql) SELECT count(*) AS moved FROM moved"), with: [append])
    }

    /// A profile change (time zone, language, premium) with its wallet row rewritten unchanged (the ledger rows of
    /// `source`) and the response under its key, in one statement.
    static func changeProfile(source: String, timezone: SQLParam, language: SQLParam, premiumUntil: SQLParam) -> PostgresWrite {
        let append = append(from: "b", carrying: ["scope", "key", "fingerprint", "status", "body", "created_at"])
        let remember = remember(from: "moved")
        return PostgresWrite(
            StoreWrite(
                .users,
                sql: """
                    WITH b AS (\(source)),
                    \(append.sql),
                    changed AS (
                      UPDATE users SET timezone = \(timezone)::TEXT, language = \(language)::TEXT, premium_until = \(premiumUntil)::BIGINT
                      WHERE id IN (SELECT user_id FROM moved)
                    ), \(remember.sql)
                    SELECT count(*) AS moved FROM moved
                    """), with: [append, remember])
    }

    // MARK: The compare-and-set batch

    /// The hold writes of a batch that creates or settles one: the new hold inserted, the settled one updated.
    static let batchHolds = PostgresWrite(
        StoreWrite(
            .holds,
            sql: """
                , opened AS (
                  INSERT INTO holds (id, user_id, amount, status, created_at, expires_at)
                  SELECT m.new_hold, m.user_id, m.new_hold_amount, 'open', m.created_at, m.new_hold_expires
                  FROM moved m WHERE m.new_hold <> ''
                ), settled AS (
                  UPDATE holds h SET status = m.settled_status, captured_amount = CASE WHEN m.has_captured THEN m.captured END,
                         settled_at = m.created_at
                  FROM moved m
                  WHERE m.settled_hold <> '' AND h.id = m.settled_hold AND h.user_id = m.user_id AND h.status = 'open'
                  RETURNING h.user_id
                )
                """), name: "batchHolds")

    /// The installation counter of a batch with a guest's free use.
    static let batchInstallationCounts = PostgresWrite(
        StoreWrite(
            .installationQuotaCounters,
            sql: """
                , counted_installations AS (
                  INSERT INTO installation_quota_counters (installation, quota, used, window_end)
                  SELECT m.installation, m.quota, m.installation_used, m.installation_window_end FROM moved m WHERE m.installation <> ''
                  ON CONFLICT (installation, quota) DO UPDATE SET used = excluded.used, window_end = excluded.window_end
                )
                """), name: "batchInstallationCounts")

    /// The compare-and-set batch (``ActionBatchWriteStatement``) over the relation `source` carrying `carried`: the
    /// ledger, the quota counter, the key, and the hold and installation writes when given (`holdCheck` fails a
    /// settled hold that was not open).
    static func actionBatch(
        source: String, carried: [String], holds: PostgresWrite?, installations: PostgresWrite?, holdCheck: String
    ) -> PostgresWrite {
        let append = append(from: "b", carrying: carried)
        let remember = remember(from: "moved")
        return PostgresWrite(
            StoreWrite(
                .quotaCounters,
                sql: """
                    WITH b AS MATERIALIZED (
                      \(source)
                    ), \(append.sql), counted AS (
                      INSERT INTO quota_counters (user_id, quota, used, window_end)
                      SELECT m.user_id, m.quota, m.used, m.window_end FROM moved m WHERE m.quota <> ''
                      ON CONFLICT (user_id, quota) DO UPDATE SET used = excluded.used, window_end = excluded.window_end
                    ), \(remember.sql)\(holds?.sql ?? "")\(installations?.sql ?? "")
                    SELECT m.user_id, m.stamp, CASE WHEN m.kind <> '' THEN nextval('ledger_entries_id_seq') END AS next_entry_id,
                           \(holdCheck) AS hold_check
                    FROM moved m
                    """), with: [append, remember] + [holds, installations].compactMap { $0 })
    }

    /// `settled`: the open holds among `ids` (a text array) settled as `status` (released or expired: nothing captured)
    /// at `settledAt`, in a statement's `WITH`; a row each. The holds a statement settles without a capture, beside the
    /// entries that give their tokens back (``append(from:carrying:)``).
    static func settleHolds(ids: SQLParam, status: SQLParam, settledAt: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .holds,
                sql: """
                    settled AS (
                      UPDATE holds SET status = \(status)::TEXT, settled_at = \(settledAt)::BIGINT
                      WHERE id = ANY(\(ids)::TEXT[]) AND status = 'open'
                      RETURNING 1
                    )
                    """))
    }

    /// Expired holds (`ids`) settled as `status` (expired), with their wallets moved by the entries of the relation `source`.
    static func expireHolds(source: String, ids: SQLParam, status: SQLParam, settledAt: SQLParam) -> PostgresWrite {
        let settle = settleHolds(ids: ids, status: status, settledAt: settledAt)
        let append = append(from: "b")
        return PostgresWrite(
            StoreWrite(
                sql: """
                    WITH \(settle.sql), b AS (\(source)), \(append.sql)
                    SELECT (SELECT count(*) FROM settled) AS settled, (SELECT count(*) FROM moved) AS moved
                    """), with: [settle, append])
    }

    // MARK: Accounts and sessions

    /// A new account (a guest on its installation, or an Apple identity's) with an empty wallet, its first session and
    /// refresh token, and a guest's sign-up counted against its address.
    static func insertAccount(
        userId: SQLParam, deviceHash: SQLParam, ipHash: SQLParam, appleSubject: SQLParam, appleEmail: SQLParam,
        appleRefreshToken: SQLParam, appleLinkedAt: SQLParam, sessionId: SQLParam, refreshHash: SQLParam,
        refreshExpiresAt: SQLParam, now: SQLParam
    ) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .installations, .users, .wallets, .guestSignups, .sessions, .refreshTokens,
                sql: """
                    WITH installation AS (
                      INSERT INTO installations (id, created_at) SELECT \(deviceHash)::TEXT, \(now) WHERE \(deviceHash)::TEXT IS NOT NULL
                      ON CONFLICT (id) DO NOTHING
                    ), new_user AS (
                      INSERT INTO users (id, timezone, created_at, installation, apple_sub, apple_email, apple_refresh_token, apple_linked_at)
                      VALUES (\(userId), 'UTC', \(now), \(deviceHash)::TEXT, \(appleSubject)::TEXT, \(appleEmail)::TEXT,
                              \(appleRefreshToken)::TEXT, \(appleLinkedAt)::BIGINT)
                      RETURNING id
                    ), new_wallet AS (
                      INSERT INTO wallets (user_id, balance, held, version)
                      SELECT id, 0, 0, 0 FROM new_user
                    ), signup AS (
                      INSERT INTO guest_signups (ip_hash, created_at) SELECT \(ipHash)::TEXT, \(now) WHERE \(ipHash)::TEXT IS NOT NULL
                    ), session AS (
                      INSERT INTO sessions (id, user_id, created_at) SELECT \(sessionId), id, \(now) FROM new_user RETURNING id
                    )
                    INSERT INTO refresh_tokens (token_hash, session_id, expires_at)
                    SELECT \(refreshHash), id, \(refreshExpiresAt) FROM session
                    """))
    }

    /// A session opened for the account found by id, installation or Apple `sub`, with its first refresh token, and the
    /// account's oldest live sessions beyond `keep` revoked and listed in the revocation feed. Returns the account and
    /// the revoked sessions' ids (the newest `keep` of the others kept, in the order of ``SessionCap/newestFirst``).
    static func openSession(
        userId: SQLParam, deviceHash: SQLParam, appleSubject: SQLParam, sessionId: SQLParam, refreshHash: SQLParam,
        refreshExpiresAt: SQLParam, keep: SQLParam, now: SQLParam
    ) -> PostgresWrite {
        let revoke = revokeLive(
            sessions: """
                id IN (
                  SELECT id FROM sessions WHERE user_id IN (SELECT id FROM account) AND revoked_at IS NULL
                  ORDER BY \(SessionCap.newestFirst) OFFSET \(keep)
                )
                """, now: now)
        return PostgresWrite(
            StoreWrite(
                .sessions, .refreshTokens,
                sql: """
                    WITH account AS (
                      SELECT \(UserRecord.columns()) FROM users WHERE id = \(userId)::TEXT
                      UNION ALL
                      SELECT \(UserRecord.columns()) FROM users WHERE installation = \(deviceHash)::TEXT
                      UNION ALL
                      SELECT \(UserRecord.columns()) FROM users WHERE apple_sub = \(appleSubject)::TEXT
                    ), session AS (
                      INSERT INTO sessions (id, user_id, created_at) SELECT \(sessionId), id, \(now) FROM account RETURNING id
                    ), token AS (
                      INSERT INTO refresh_tokens (token_hash, session_id, expires_at)
                      SELECT \(refreshHash), id, \(refreshExpiresAt) FROM session
                    ), \(revoke.sql)
                    SELECT \(UserRecord.columnNames), ARRAY(SELECT id FROM revoked) AS revoked FROM account
                    """), with: [revoke])
    }

    /// A refresh token claimed (once, across processes) and its successor stored; returns the token's session, its
    /// account and whether this call claimed it.
    static func rotateRefreshToken(hash: SQLParam, nextHash: SQLParam, nextExpiresAt: SQLParam, now: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .refreshTokens,
                sql: """
                    WITH token AS (
                      SELECT r.session_id, r.expires_at, r.used_at, s.revoked_at,
                             \(UserRecord.columns(of: "u"))
                      FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id JOIN users u ON u.id = s.user_id
                      WHERE r.token_hash = \(hash)
                    ), claim AS (
                      UPDATE refresh_tokens r SET used_at = \(now)
                      FROM sessions s
                      WHERE r.token_hash = \(hash) AND r.used_at IS NULL AND r.expires_at > \(now)
                        AND s.id = r.session_id AND s.revoked_at IS NULL
                      RETURNING r.session_id
                    ), successor AS (
                      INSERT INTO refresh_tokens (token_hash, session_id, expires_at)
                      SELECT \(nextHash), session_id, \(nextExpiresAt) FROM claim
                    )
                    SELECT token.*, (SELECT count(*) FROM claim) AS claimed FROM token
                    """))
    }

    /// `revoked` and `feed`: the live sessions the condition `sessions` selects (on a `sessions` row) revoked at `now` and
    /// listed in the revocation feed, in a statement's `WITH`; `revoked` returns each one's `id` and `user_id`. Every
    /// revocation of a live session is this fragment (the first revocation time kept: a revoked session is not live).
    static func revokeLive(sessions condition: String, now: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .sessions, .sessionRevocations,
                sql: """
                    revoked AS (
                      UPDATE sessions SET revoked_at = \(now) WHERE (\(condition)) AND revoked_at IS NULL RETURNING id, user_id
                    ), feed AS (
                      INSERT INTO session_revocations (session_id, user_id) SELECT id, user_id FROM revoked
                    )
                    """))
    }

    /// A session revoked (the first revocation time kept) and listed in the revocation feed; returns its id if it was live.
    static func revokeSession(id: SQLParam, now: SQLParam) -> PostgresWrite {
        let revoke = revokeLive(sessions: "id = \(id)", now: now)
        return PostgresWrite(StoreWrite(sql: "WITH \(revoke.sql) SELECT id FROM revoked"), with: [revoke])
    }

    /// A guest linked to an email and password and detached from its installation, its wallet row rewritten unchanged
    /// first; returns the account.
    static func linkCredentials(userId: SQLParam, email: SQLParam, passwordHash: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .wallets, .users,
                sql: """
                    WITH touched AS (
                      UPDATE wallets SET version = version WHERE user_id = \(userId) RETURNING user_id
                    )
                    UPDATE users SET email = \(email), password_hash = \(passwordHash), installation = NULL
                    WHERE id = (SELECT user_id FROM touched) AND email IS NULL
                    RETURNING \(UserRecord.columns())
                    """))
    }

    /// The failed sign-in counted for the pair and for the account key.
    static func countSignInFailure(
        account: SQLParam, address: SQLParam, failures: SQLParam, lastAt: SQLParam, lockedUntil: SQLParam, total: SQLParam,
        totalLastAt: SQLParam
    ) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .signInFailures,
                sql: """
                    INSERT INTO sign_in_failures (account_key, address_key, failures, last_failure_at, locked_until)
                    VALUES (\(account), \(address), \(failures), \(lastAt), \(lockedUntil)::BIGINT),
                           (\(account), '', \(total), \(totalLastAt), NULL)
                    ON CONFLICT (account_key, address_key) DO UPDATE SET failures = excluded.failures,
                      last_failure_at = excluded.last_failure_at, locked_until = excluded.locked_until
                    """))
    }

    /// The account's total and the pair's failures deleted.
    static func clearSignInFailures(account: SQLParam, address: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .signInFailures,
                sql: "DELETE FROM sign_in_failures WHERE account_key = \(account) AND address_key IN ('', \(address))"))
    }

    /// An account deleted with its keys and listed in the revocation feed; a row when it existed. The deletion of the
    /// `users` row reaches its other rows through the schema's `ON DELETE CASCADE` (and `SET NULL`), so those tables are
    /// changed too.
    static func deleteAccount(id: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .idempotencyKeys, .users, .sessionRevocations, .accountCodes, .appAttestKeys, .consumptionConsents, .documents,
                .holds, .ledgerEntries, .merges, .purchases, .quotaCounters, .refreshTokens, .sessions, .subscriptions,
                .syncClients, .syncState, .unattestedSpends, .wallets,
                sql: """
                    WITH keys AS (DELETE FROM idempotency_keys WHERE scope = \(id)),
                    gone AS (DELETE FROM users WHERE id = \(id) RETURNING id)
                    INSERT INTO session_revocations (user_id) SELECT id FROM gone RETURNING 1
                    """))
    }
}
