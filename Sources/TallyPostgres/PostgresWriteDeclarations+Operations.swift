import Foundation
import TallyStore

// The writes of purchases, App Attest, consumption requests, maintenance, server instances, secrets and leases
// (see ``Writes``).
extension Writes {
    // MARK: Purchases

    /// A server notification recorded as seen; a row the first time.
    static func recordPurchaseNotification(
        uuid: SQLParam, type: SQLParam, transactionId: SQLParam, signedAt: SQLParam, now: SQLParam
    ) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .purchaseNotifications,
                sql: """
                    INSERT INTO purchase_notifications (uuid, type, transaction_id, signed_at, received_at)
                    VALUES (\(uuid), \(type), \(transactionId), \(signedAt), \(now))
                    ON CONFLICT (uuid) DO NOTHING RETURNING 1 AS inserted
                    """))
    }

    /// A subscription's rows of no account deleted.
    static func dropUnownedListings(original: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .purchases,
                sql: "DELETE FROM purchases WHERE original_transaction_id = \(original) AND kind = 'subscription' AND user_id IS NULL"))
    }

    /// A purchase's row: a consumable's replaces what it was (`consumable`), a subscription's row in an account's
    /// list is added once.
    static func storePurchase(
        transactionId: SQLParam, originalTransactionId: SQLParam, productId: SQLParam, kind: SQLParam, quantity: SQLParam,
        tokens: SQLParam, environment: SQLParam, userId: SQLParam, claimed: SQLParam, purchasedAt: SQLParam, revokedAt: SQLParam,
        refundedTokens: SQLParam, refunds: SQLParam, reversedAt: SQLParam, signedAt: SQLParam, recordedAt: SQLParam, consumable: Bool
    ) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .purchases,
                sql: """
                    INSERT INTO purchases (transaction_id, original_transaction_id, product_id, kind, quantity, tokens, environment,
                      user_id, claimed, purchased_at, revoked_at, refunded_tokens, refunds, reversed_at, signed_at, recorded_at)
                    VALUES (\(transactionId), \(originalTransactionId), \(productId), \(kind),
                      \(quantity), \(tokens), \(environment), \(userId), \(claimed),
                      \(purchasedAt), \(revokedAt), \(refundedTokens), \(refunds),
                      \(reversedAt), \(signedAt), \(recordedAt))
                    \(consumable
                      ? "ON CONFLICT (transaction_id) WHERE kind = 'consumable' DO UPDATE SET user_id = excluded.user_id, "
                        + "claimed = excluded.claimed, revoked_at = excluded.revoked_at, refunded_tokens = excluded.refunded_tokens, "
                        + "refunds = excluded.refunds, reversed_at = excluded.reversed_at, signed_at = excluded.signed_at"
                      : "ON CONFLICT (original_transaction_id, user_id) WHERE kind = 'subscription' DO NOTHING")
                    """))
    }

    /// A subscription's row, inserted or replaced.
    static func storeSubscription(
        originalTransactionId: SQLParam, transactionId: SQLParam, productId: SQLParam, environment: SQLParam, userId: SQLParam,
        expiresAt: SQLParam, graceUntil: SQLParam, revokedAt: SQLParam, revocation: SQLParam, signedAt: SQLParam
    ) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .subscriptions,
                sql: """
                    INSERT INTO subscriptions (original_transaction_id, transaction_id, product_id, environment, user_id, expires_at,
                      grace_until, revoked_at, revocation, signed_at)
                    VALUES (\(originalTransactionId), \(transactionId), \(productId),
                      \(environment), \(userId), \(expiresAt), \(graceUntil),
                      \(revokedAt), \(revocation), \(signedAt))
                    ON CONFLICT (original_transaction_id) DO UPDATE SET transaction_id = excluded.transaction_id,
                      user_id = excluded.user_id, expires_at = excluded.expires_at, grace_until = excluded.grace_until,
                      revoked_at = excluded.revoked_at, revocation = excluded.revocation, signed_at = excluded.signed_at
                    """))
    }

    /// A purchase's entries (the relation `source`) and bought premium ends (the relation `premiums`), in one statement.
    static func purchaseLedger(source: String, premiums: String) -> PostgresWrite {
        let append = append(from: "b")
        return PostgresWrite(
            StoreWrite(
                .users,
                sql: """
                    WITH b AS (\(source)), \(append.sql), p AS (\(premiums)), premium AS (
                      UPDATE users u SET purchased_premium_until = CASE WHEN p.has_until THEN p.until END
                      FROM p WHERE u.id = p.user_id AND u.id IN (SELECT user_id FROM moved)
                      RETURNING 1
                    )
                    SELECT (SELECT count(*) FROM moved) AS moved, (SELECT count(*) FROM premium) AS premium
                    """), with: [append])
    }

    // MARK: App Attest

    /// A challenge stored until it expires.
    static func issueAttestationChallenge(hash: SQLParam, expiresAt: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .attestationChallenges,
                sql: "INSERT INTO attestation_challenges (challenge_hash, expires_at) VALUES (\(hash), \(expiresAt))"))
    }

    /// A live challenge deleted; a row when it was there.
    static func consumeAttestationChallenge(hash: SQLParam, now: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .attestationChallenges,
                sql: """
                    DELETE FROM attestation_challenges WHERE challenge_hash = \(hash) AND expires_at > \(now)
                    RETURNING challenge_hash
                    """))
    }

    /// The expired challenges deleted, a row each.
    static func purgeAttestationChallenges(now: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .attestationChallenges, sql: "DELETE FROM attestation_challenges WHERE expires_at <= \(now) RETURNING 1 AS gone"))
    }

    /// An attested key inserted unless its id exists; a row when inserted.
    static func saveAttestedKey(
        keyId: SQLParam, userId: SQLParam, installation: SQLParam, publicKey: SQLParam, counter: SQLParam, environment: SQLParam,
        receipt: SQLParam, attestedAt: SQLParam
    ) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .appAttestKeys,
                sql: """
                    INSERT INTO app_attest_keys (key_id, user_id, installation, public_key, counter, environment, receipt, attested_at)
                    VALUES (\(keyId), \(userId), \(installation), \(publicKey), \(counter),
                            \(environment), \(receipt), \(attestedAt))
                    ON CONFLICT (key_id) DO NOTHING RETURNING key_id
                    """))
    }

    /// A key's assertion counter raised when below; a row when raised.
    static func advanceAssertionCounter(keyId: SQLParam, counter: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .appAttestKeys,
                sql: """
                    UPDATE app_attest_keys SET counter = \(counter) WHERE key_id = \(keyId) AND counter < \(counter)
                    RETURNING key_id
                    """))
    }

    /// An unattested spend counted on the user's flag.
    static func recordUnattestedSpend(userId: SQLParam, reason: SQLParam, now: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .unattestedSpends,
                sql: """
                    INSERT INTO unattested_spends (user_id, count, last_reason, last_at) VALUES (\(userId), 1, \(reason), \(now))
                    ON CONFLICT (user_id) DO UPDATE SET count = unattested_spends.count + 1, last_reason = excluded.last_reason,
                      last_at = excluded.last_at
                    """))
    }

    // MARK: Consumption requests

    /// The user's consent to consumption answers and its time.
    static func setConsumptionConsent(userId: SQLParam, consented: SQLParam, now: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .consumptionConsents,
                sql: """
                    INSERT INTO consumption_consents (user_id, consented, changed_at) VALUES (\(userId), \(consented), \(now))
                    ON CONFLICT (user_id) DO UPDATE SET consented = excluded.consented, changed_at = excluded.changed_at
                    """))
    }

    /// A request queued once per notification, due at once; a row when queued.
    static func queueConsumptionRequest(
        notificationUUID: SQLParam, transactionId: SQLParam, environment: SQLParam, reason: SQLParam, requestedAt: SQLParam
    ) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .consumptionRequests,
                sql: """
                    INSERT INTO consumption_requests
                      (notification_uuid, transaction_id, environment, reason, requested_at, status, next_attempt_at)
                    VALUES (\(notificationUUID), \(transactionId), \(environment), \(reason),
                            \(requestedAt), 'pending', \(requestedAt))
                    ON CONFLICT (notification_uuid) DO NOTHING RETURNING notification_uuid
                    """))
    }

    /// A pending request's attempt recorded.
    static func finishConsumptionAttempt(
        notificationUUID: SQLParam, status: SQLParam, answer: SQLParam, error: SQLParam, next: SQLParam, answeredAt: SQLParam
    ) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .consumptionRequests,
                sql: """
                    UPDATE consumption_requests SET status = \(status), attempts = attempts + 1, answer = \(answer),
                      last_error = \(error), next_attempt_at = COALESCE(\(next)::BIGINT, next_attempt_at), answered_at = \(answeredAt)
                    WHERE notification_uuid = \(notificationUUID) AND status = 'pending'
                    """))
    }

    /// Apple's decision recorded on the transaction's requests not yet decided.
    static func recordRefundDecision(transactionId: SQLParam, decision: SQLParam, at: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .consumptionRequests,
                sql: """
                    UPDATE consumption_requests SET decision = \(decision), decided_at = \(at)
                    WHERE transaction_id = \(transactionId) AND decision IS NULL
                    """))
    }

    // MARK: Maintenance

    /// A server secret inserted unless one of its name exists; a row when inserted.
    static func createSecret(name: SQLParam, value: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .serverSecrets,
                sql: "INSERT INTO server_secrets (name, value) VALUES (\(name), \(value)) ON CONFLICT (name) DO NOTHING RETURNING value"))
    }

    /// Old idempotency records, revocation-feed rows (older than `retention` on the database's clock), sign-in
    /// failures and guest sign-up records deleted.
    static func purge(idempotencyBefore: SQLParam, retention: SQLParam, signInFailuresBefore: SQLParam, signupsBefore: SQLParam)
        -> PostgresWrite
    {
        PostgresWrite(
            StoreWrite(
                .idempotencyKeys, .sessionRevocations, .signInFailures, .guestSignups,
                sql: """
                    WITH keys AS (DELETE FROM idempotency_keys WHERE created_at < \(idempotencyBefore)),
                    revocations AS (
                      DELETE FROM session_revocations
                      WHERE revoked_at < (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT - \(retention)
                    ),
                    failures AS (DELETE FROM sign_in_failures WHERE last_failure_at < \(signInFailuresBefore))
                    DELETE FROM guest_signups WHERE created_at < \(signupsBefore)
                    """))
    }

    /// Up to `limit` expired refresh tokens deleted, with the sessions they leave without a token expiring at `cutoff`
    /// or later; returns how many of both, and the sessions' ids.
    static func purgeExpiredTokens(cutoff: SQLParam, limit: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .refreshTokens, .sessions,
                sql: """
                    WITH tokens AS (
                      DELETE FROM refresh_tokens WHERE token_hash IN (
                        SELECT token_hash FROM refresh_tokens WHERE expires_at < \(cutoff) ORDER BY expires_at LIMIT \(limit)
                      ) RETURNING session_id
                    ), ended AS (
                      DELETE FROM sessions s WHERE s.id IN (SELECT session_id FROM tokens)
                        AND NOT EXISTS (SELECT 1 FROM refresh_tokens r WHERE r.session_id = s.id AND r.expires_at >= \(cutoff))
                      RETURNING s.id
                    )
                    SELECT (SELECT count(*) FROM tokens) + (SELECT count(*) FROM ended) AS deleted, ARRAY(SELECT id FROM ended) AS sessions
                    """))
    }

    /// Up to `limit` sessions revoked before `cutoff` deleted (their tokens by cascade); returns how many, and their ids.
    static func purgeRevokedSessions(cutoff: SQLParam, limit: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .sessions, .refreshTokens,
                sql: """
                    WITH ended AS (
                      DELETE FROM sessions WHERE id IN (
                        SELECT id FROM sessions WHERE revoked_at < \(cutoff) ORDER BY revoked_at LIMIT \(limit)
                      ) RETURNING id
                    )
                    SELECT (SELECT count(*) FROM ended) AS deleted, ARRAY(SELECT id FROM ended) AS sessions
                    """))
    }

    // MARK: Server instances and leases

    /// The rows of processes not seen since `staleBefore` deleted.
    static func deleteStaleInstances(staleBefore: SQLParam) -> PostgresWrite {
        PostgresWrite(StoreWrite(.serverInstances, sql: "DELETE FROM server_instances WHERE seen_at <= \(staleBefore)"))
    }

    /// A process's row inserted (`heartbeat`: or, when there, marked seen).
    static func storeInstance(
        id: SQLParam, host: SQLParam, pid: SQLParam, signingKeys: SQLParam, adminKey: SQLParam, startedAt: SQLParam, seenAt: SQLParam,
        heartbeat: Bool
    ) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .serverInstances,
                sql: """
                    INSERT INTO server_instances (id, host, pid, signing_keys, admin_key, started_at, seen_at)
                    VALUES (\(id), \(host), \(pid), \(signingKeys), \(adminKey),
                            \(startedAt), \(seenAt))
                    \(heartbeat ? "ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at" : "")
                    """))
    }

    /// A process's row deleted (it stops).
    static func leave(id: SQLParam) -> PostgresWrite {
        PostgresWrite(StoreWrite(.serverInstances, sql: "DELETE FROM server_instances WHERE id = \(id)"))
    }

    /// A lease taken unless another holder's runs past `now`; a row when taken.
    static func takeLease(name: SQLParam, holder: SQLParam, until: SQLParam, now: SQLParam) -> PostgresWrite {
        PostgresWrite(
            StoreWrite(
                .leases,
                sql: """
                    INSERT INTO leases (name, holder, expires_at) VALUES (\(name), \(holder), \(until))
                    ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
                    WHERE leases.expires_at <= \(now) OR leases.holder = excluded.holder
                    RETURNING holder
                    """))
    }

    /// A holder's lease ended.
    static func releaseLease(name: SQLParam, holder: SQLParam) -> PostgresWrite {
        PostgresWrite(StoreWrite(.leases, sql: "DELETE FROM leases WHERE name = \(name) AND holder = \(holder)"))
    }
}
