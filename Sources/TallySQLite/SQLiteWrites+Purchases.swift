import TallyStore

extension SQLiteWrites {
    // MARK: Purchases (SQLiteStore+Purchases)

    /// Records a notification as seen (once).
    static let recordNotification = StoreWrite(
        .purchaseNotifications,
        sql: """
            INSERT INTO purchase_notifications (uuid, type, transaction_id, signed_at, received_at) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (uuid) DO NOTHING
            """)

    /// Drops a subscription's rows that no account lists.
    static let dropUnownedListings = StoreWrite(
        .purchases, sql: "DELETE FROM purchases WHERE original_transaction_id = ? AND kind = 'subscription' AND user_id IS NULL")

    /// Stores a consumable's row, replacing what it was.
    static let storeConsumable = StoreWrite(
        .purchases,
        sql: """
            INSERT INTO purchases (transaction_id, original_transaction_id, product_id, kind, quantity, tokens, environment,
              user_id, claimed, purchased_at, revoked_at, refunded_tokens, refunds, reversed_at, signed_at, recorded_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (transaction_id) WHERE kind = 'consumable' DO UPDATE SET user_id = excluded.user_id, claimed = excluded.claimed,
              revoked_at = excluded.revoked_at, refunded_tokens = excluded.refunded_tokens, refunds = excluded.refunds,
              reversed_at = excluded.reversed_at, signed_at = excluded.signed_at
            """)

    /// Adds a subscription's row to an account's list, once.
    static let listSubscription = StoreWrite(
        .purchases,
        sql: """
            INSERT INTO purchases (transaction_id, original_transaction_id, product_id, kind, quantity, tokens, environment,
              user_id, claimed, purchased_at, revoked_at, refunded_tokens, refunds, reversed_at, signed_at, recorded_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (original_transaction_id, user_id) WHERE kind = 'subscription' DO NOTHING
            """)

    /// Stores a subscription's state.
    static let storeSubscription = StoreWrite(
        .subscriptions,
        sql: """
            INSERT INTO subscriptions (original_transaction_id, transaction_id, product_id, environment, user_id, expires_at,
              grace_until, revoked_at, revocation, signed_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (original_transaction_id) DO UPDATE SET transaction_id = excluded.transaction_id,
              user_id = excluded.user_id, expires_at = excluded.expires_at, grace_until = excluded.grace_until,
              revoked_at = excluded.revoked_at, revocation = excluded.revocation, signed_at = excluded.signed_at
            """)

    /// Sets the premium an account's purchases give it.
    static let setPurchasedPremium = StoreWrite(.users, sql: "UPDATE users SET purchased_premium_until = ? WHERE id = ?")

    // MARK: Merges (SQLiteStore+Merge)

    /// Moves a guest's open hold to the account.
    static let moveHold = StoreWrite(
        .holds, sql: "UPDATE holds SET user_id = ? WHERE id = ? AND user_id = ? AND status = 'open'")

    /// Marks a guest merged into an account.
    static let markMerged = StoreWrite(
        .users, sql: "UPDATE users SET installation = NULL, merged_into = ?, purchased_premium_until = NULL WHERE id = ?")

    /// Sets the account's premium after a merge.
    static let setMergedPremium = StoreWrite(
        .users, sql: "UPDATE users SET purchased_premium_until = ?, premium_until = ? WHERE id = ?")

    /// Drops the guest's rows of subscriptions the account lists too (the account's row stays).
    static let dropListedTwice = StoreWrite(
        .purchases,
        sql: """
            DELETE FROM purchases WHERE user_id = ?1 AND kind = 'subscription' AND original_transaction_id IN (
              SELECT original_transaction_id FROM purchases WHERE user_id = ?2 AND kind = 'subscription')
            """)

    /// Moves the guest's purchases to the account.
    static let movePurchases = StoreWrite(.purchases, sql: "UPDATE purchases SET user_id = ? WHERE user_id = ?")

    /// Moves the guest's subscriptions to the account.
    static let moveSubscriptions = StoreWrite(.subscriptions, sql: "UPDATE subscriptions SET user_id = ? WHERE user_id = ?")

    /// Writes a guest's document into the account where the account has none, or over a tombstone.
    static let mergeDocument = StoreWrite(
        .documents,
        sql: """
            INSERT INTO documents (user_id, collection, id, data, range_value, version, updated_at, deleted)
            VALUES (?, ?, ?, ?, ?, ?, ?, 0)
            ON CONFLICT (user_id, collection, id) DO UPDATE SET data = excluded.data, range_value = excluded.range_value,
              version = excluded.version, updated_at = excluded.updated_at, deleted = 0
            WHERE documents.deleted = 1
            """)

    /// Deletes every document of a (merged) guest.
    static let deleteUserDocuments = StoreWrite(.documents, sql: "DELETE FROM documents WHERE user_id = ?")

    /// Stores the account's sync state after a merge.
    static let storeMergedSync = StoreWrite(
        .syncState,
        sql: """
            INSERT INTO sync_state (user_id, version, purged_through, stored_documents, stored_bytes) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (user_id) DO UPDATE SET version = excluded.version, stored_documents = excluded.stored_documents,
              stored_bytes = excluded.stored_bytes
            """)

    /// Empties a merged guest's sync state.
    static let emptyGuestSync = StoreWrite(
        .syncState,
        sql: "UPDATE sync_state SET version = ?, purged_through = ?, stored_documents = 0, stored_bytes = 0 WHERE user_id = ?")

    /// Moves the guest's sync clients to the account.
    static let moveSyncClients = StoreWrite(.syncClients, sql: "UPDATE sync_clients SET user_id = ? WHERE user_id = ?")

    /// Records a merge.
    static let recordMerge = StoreWrite(
        .merges, sql: "INSERT INTO merges (guest_id, account_id, summary, merged_at) VALUES (?, ?, ?, ?)")

    // MARK: Documents (DocumentWriter, SQLiteStore+Documents)

    /// Writes one document (or its tombstone) at the user's next version.
    static let writeDocument = StoreWrite(
        .documents,
        sql: """
            INSERT INTO documents (user_id, collection, id, data, range_value, version, updated_at, deleted)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (user_id, collection, id) DO UPDATE SET data = excluded.data, range_value = excluded.range_value,
              version = excluded.version, updated_at = excluded.updated_at, deleted = excluded.deleted
            """)

    /// Stores the user's version and usage after their writes.
    static let storeSyncState = StoreWrite(
        .syncState,
        sql: """
            INSERT INTO sync_state (user_id, version, stored_documents, stored_bytes) VALUES (?, ?, ?, ?)
            ON CONFLICT (user_id) DO UPDATE SET version = excluded.version, stored_documents = excluded.stored_documents,
              stored_bytes = excluded.stored_bytes
            """)

    /// Stores a sync client's last mutation id.
    static let storeSyncClient = StoreWrite(
        .syncClients,
        sql: """
            INSERT INTO sync_clients (client_id, user_id, last_mutation_id, updated_at) VALUES (?, ?, ?, ?)
            ON CONFLICT (client_id) DO UPDATE SET last_mutation_id = excluded.last_mutation_id, updated_at = excluded.updated_at
            """)

    /// Deletes one tombstone.
    static let purgeTombstone = StoreWrite(
        .documents, sql: "DELETE FROM documents WHERE user_id = ? AND collection = ? AND id = ? AND deleted = 1")

    /// Takes purged tombstones off their owner's stored documents and raises `purged_through`.
    static let notePurgedTombstones = StoreWrite(
        .syncState,
        sql: """
            UPDATE sync_state SET purged_through = max(purged_through, ?), stored_documents = stored_documents - ?
            WHERE user_id = ?
            """)

    /// Deletes the sync clients idle longest before a cutoff.
    static let purgeSyncClients = StoreWrite(
        .syncClients,
        sql: """
            DELETE FROM sync_clients WHERE client_id IN (
              SELECT client_id FROM sync_clients WHERE updated_at < ? ORDER BY updated_at LIMIT ?)
            """)

    // MARK: Apple (SQLiteStore+Apple)

    /// Inserts an Apple token's use, or finds it taken (`RETURNING 1` when this call may use it).
    static let useAppleToken = StoreWrite(
        .appleTokenUses,
        sql: """
            INSERT INTO apple_token_uses (subject, digest, expires_at, merging_guest, used_at) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (subject, digest) DO UPDATE SET used_at = apple_token_uses.used_at
            WHERE apple_token_uses.merging_guest = excluded.merging_guest
            RETURNING 1
            """)

    /// Links an Apple identity to an account, detaching a guest from its installation.
    static let linkApple = StoreWrite(
        .users,
        sql: """
            UPDATE users SET apple_sub = ?, apple_email = ?, apple_refresh_token = ?, apple_linked_at = ?, installation = NULL
            WHERE id = ?
            """)

    /// Marks an account's Apple consent revoked.
    static let revokeAppleConsent = StoreWrite(
        .users,
        sql: """
            UPDATE users SET apple_consent_revoked_at = ?, apple_refresh_token = NULL
            WHERE id = ? AND apple_consent_revoked_at IS NULL
            """)

    /// Stores an Apple identity's contact and gives a revoked consent again.
    static let storeAppleContact = StoreWrite(
        .users,
        sql: """
            UPDATE users SET apple_email = coalesce(?, apple_email), apple_refresh_token = coalesce(?, apple_refresh_token),
              apple_linked_at = CASE WHEN apple_consent_revoked_at IS NULL THEN apple_linked_at ELSE ? END,
              apple_consent_revoked_at = NULL
            WHERE apple_sub = ?
            """)

    /// Clears an account's Apple identity.
    static let unlinkApple = StoreWrite(
        .users,
        sql: """
            UPDATE users SET apple_sub = NULL, apple_email = NULL, apple_refresh_token = NULL, apple_linked_at = NULL,
              apple_consent_revoked_at = NULL
            WHERE id = ?
            """)

    /// Records an Apple notice's id (once).
    static let recordAppleNotice = StoreWrite(
        .appleNotifications,
        sql: "INSERT INTO apple_notifications (jti, keep_until, received_at) VALUES (?, ?, ?) ON CONFLICT (jti) DO NOTHING")

    /// Deletes a batch of Apple token uses past their time.
    static let purgeAppleTokenUses = StoreWrite(
        .appleTokenUses,
        sql: """
            DELETE FROM apple_token_uses
            WHERE (subject, digest) IN (SELECT subject, digest FROM apple_token_uses WHERE expires_at < ? LIMIT ?)
            """)

    /// Deletes a batch of Apple notice ids past their time.
    static let purgeAppleNotices = StoreWrite(
        .appleNotifications,
        sql: "DELETE FROM apple_notifications WHERE jti IN (SELECT jti FROM apple_notifications WHERE keep_until < ? LIMIT ?)")

    // MARK: Attestation, consumption, console (SQLiteStore+Attestation, +Consumption, +Console)

    /// Stores an attestation challenge.
    static let issueChallenge = StoreWrite(
        .attestationChallenges, sql: "INSERT INTO attestation_challenges (challenge_hash, expires_at) VALUES (?, ?)")

    /// Consumes a live attestation challenge.
    static let consumeChallenge = StoreWrite(
        .attestationChallenges, sql: "DELETE FROM attestation_challenges WHERE challenge_hash = ? AND expires_at > ?")

    /// Deletes expired attestation challenges.
    static let purgeChallenges = StoreWrite(.attestationChallenges, sql: "DELETE FROM attestation_challenges WHERE expires_at <= ?")

    /// Saves an attested key unless its id exists.
    static let saveAttestedKey = StoreWrite(
        .appAttestKeys,
        sql: """
            INSERT INTO app_attest_keys
              (key_id, user_id, installation, public_key, counter, environment, receipt, attested_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key_id) DO NOTHING
            """)

    /// Raises an attested key's assertion counter when below.
    static let advanceAssertionCounter = StoreWrite(
        .appAttestKeys, sql: "UPDATE app_attest_keys SET counter = ? WHERE key_id = ? AND counter < ?")

    /// Counts an unattested spend on the user's flag.
    static let countUnattestedSpend = StoreWrite(
        .unattestedSpends,
        sql: """
            INSERT INTO unattested_spends (user_id, count, last_reason, last_at) VALUES (?, 1, ?, ?)
            ON CONFLICT (user_id) DO UPDATE SET count = count + 1, last_reason = excluded.last_reason,
              last_at = excluded.last_at
            """)

    /// Records a user's consumption consent.
    static let setConsumptionConsent = StoreWrite(
        .consumptionConsents,
        sql: """
            INSERT INTO consumption_consents (user_id, consented, changed_at) VALUES (?, ?, ?)
            ON CONFLICT (user_id) DO UPDATE SET consented = excluded.consented, changed_at = excluded.changed_at
            """)

    /// Queues a consumption request once per notification.
    static let queueConsumptionRequest = StoreWrite(
        .consumptionRequests,
        sql: """
            INSERT INTO consumption_requests
              (notification_uuid, transaction_id, environment, reason, requested_at, status, next_attempt_at)
            VALUES (?, ?, ?, ?, ?, 'pending', ?) ON CONFLICT (notification_uuid) DO NOTHING
            """)

    /// Records a consumption attempt's end.
    static let finishConsumptionAttempt = StoreWrite(
        .consumptionRequests,
        sql: """
            UPDATE consumption_requests SET status = ?, attempts = attempts + 1, answer = ?, last_error = ?,
              next_attempt_at = COALESCE(?, next_attempt_at), answered_at = ?
            WHERE notification_uuid = ? AND status = 'pending'
            """)

    /// Records Apple's refund decision on a transaction's undecided requests.
    static let recordRefundDecision = StoreWrite(
        .consumptionRequests,
        sql: "UPDATE consumption_requests SET decision = ?, decided_at = ? WHERE transaction_id = ? AND decision IS NULL")

    /// Appends one console audit row, returning it.
    static let appendAudit = StoreWrite(
        .consoleAudit,
        sql: """
            INSERT INTO console_audit (at, operator_session, action, user_id, before, after) VALUES (?, ?, ?, ?, ?, ?)
            RETURNING *
            """)
}
