import TallyStore

/// Every write the SQLite store runs (the migrations aside), each declared once with the tables it changes
/// (``StoreWrite``): a write runs only through `Database.run(_:changing:arguments:)` and its `RETURNING` variants,
/// which note the declaration with the rows the call site changes, and what the caches forget as the transaction
/// commits is derived from those notes (``WriterChanges``). A test reads these files and fails for an
/// `INSERT`/`UPDATE`/`DELETE` outside a declaration, or for a declaration whose tables differ from those its SQL
/// writes — including the tables a `DELETE` reaches through `ON DELETE CASCADE`/`SET NULL` (`WriteDeclarationTests`).
enum SQLiteWrites {
    // MARK: The ledger (SQLiteStore.append, SQLiteStore+Commands)

    /// Moves an account's wallet to the state an entry leaves it in, over the version read.
    static let moveWallet = StoreWrite(
        .wallets, sql: "UPDATE wallets SET balance = ?, held = ?, version = ? WHERE user_id = ? AND version = ?")

    /// Appends one ledger entry (beside ``moveWallet``, in `SQLiteStore.append` only).
    static let appendEntry = StoreWrite(
        .ledgerEntries,
        sql: """
            INSERT INTO ledger_entries (user_id, kind, amount, held_change, balance_after, held_after, reason, created_at, reference)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)

    /// Stores a response under its idempotency key.
    static let rememberResponse = StoreWrite(
        .idempotencyKeys,
        sql: """
            INSERT INTO idempotency_keys (scope, key, fingerprint, status, body, created_at)
            VALUES (?, ?, ?, ?, ?, ?)
            """)

    /// Opens a hold.
    static let openHold = StoreWrite(
        .holds, sql: "INSERT INTO holds (id, user_id, amount, status, created_at, expires_at) VALUES (?, ?, ?, 'open', ?, ?)")

    /// Settles an open hold: captured (with its amount), or released or expired (the amount `NULL`): a command's
    /// settlement, an expiry, a merge's release.
    static let settleHold = StoreWrite(
        .holds, sql: "UPDATE holds SET status = ?, captured_amount = ?, settled_at = ? WHERE id = ? AND status = 'open'")

    /// Stores an account's quota counter.
    static let storeQuotaCounter = StoreWrite(
        .quotaCounters,
        sql: """
            INSERT INTO quota_counters (user_id, quota, used, window_end) VALUES (?, ?, ?, ?)
            ON CONFLICT (user_id, quota) DO UPDATE SET used = excluded.used, window_end = excluded.window_end
            """)

    /// Stores an installation's quota counter.
    static let storeInstallationCounter = StoreWrite(
        .installationQuotaCounters,
        sql: """
            INSERT INTO installation_quota_counters (installation, quota, used, window_end) VALUES (?, ?, ?, ?)
            ON CONFLICT (installation, quota) DO UPDATE SET used = excluded.used, window_end = excluded.window_end
            """)

    /// Changes an account's profile (time zone, language, premium).
    static let changeProfile = StoreWrite(
        .users, sql: "UPDATE users SET timezone = ?, language = ?, premium_until = ? WHERE id = ?")

    // MARK: Accounts and sessions (SQLiteStore+Identity, +AccountCodes, +Apple)

    /// Records an installation (a device hash) once.
    static let recordInstallation = StoreWrite(
        .installations, sql: "INSERT INTO installations (id, created_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING")

    /// Creates a guest of an installation.
    static let createGuest = StoreWrite(
        .users, sql: "INSERT INTO users (id, timezone, created_at, installation) VALUES (?, 'UTC', ?, ?)")

    /// Creates an account of an Apple identity.
    static let createAppleAccount = StoreWrite(
        .users,
        sql: """
            INSERT INTO users (id, timezone, created_at, apple_sub, apple_email, apple_refresh_token, apple_linked_at)
            VALUES (?, 'UTC', ?, ?, ?, ?, ?)
            """)

    /// Creates a new account's empty wallet (its first tokens are a ledger entry).
    static let createWallet = StoreWrite(.wallets, sql: "INSERT INTO wallets (user_id, balance, held, version) VALUES (?, 0, 0, 0)")

    /// Counts a guest sign-up of an address.
    static let recordGuestSignup = StoreWrite(.guestSignups, sql: "INSERT INTO guest_signups (ip_hash, created_at) VALUES (?, ?)")

    /// Opens a session.
    static let openSession = StoreWrite(.sessions, sql: "INSERT INTO sessions (id, user_id, created_at) VALUES (?, ?, ?)")

    /// Revokes one live session.
    static let revokeSession = StoreWrite(
        .sessions, sql: "UPDATE sessions SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL")

    /// Revokes every live session of an account but one (`NULL`: none kept).
    static let revokeSessionsOfUser = StoreWrite(
        .sessions, sql: "UPDATE sessions SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL AND id IS NOT ?")

    /// Deletes an ended session, and its refresh tokens with it (`ON DELETE CASCADE`).
    static let deleteSession = StoreWrite(.sessions, .refreshTokens, sql: "DELETE FROM sessions WHERE id = ?")

    /// Issues a refresh token of a session.
    static let issueRefreshToken = StoreWrite(
        .refreshTokens, sql: "INSERT INTO refresh_tokens (token_hash, session_id, expires_at) VALUES (?, ?, ?)")

    /// Marks a refresh token used.
    static let useRefreshToken = StoreWrite(.refreshTokens, sql: "UPDATE refresh_tokens SET used_at = ? WHERE token_hash = ?")

    /// Deletes an expired refresh token.
    static let deleteRefreshToken = StoreWrite(.refreshTokens, sql: "DELETE FROM refresh_tokens WHERE token_hash = ?")

    /// Stores a pair's or an account's sign-in failures.
    static let storeSignInFailures = StoreWrite(
        .signInFailures,
        sql: """
            INSERT INTO sign_in_failures (account_key, address_key, failures, last_failure_at, locked_until)
            VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (account_key, address_key) DO UPDATE SET failures = excluded.failures,
              last_failure_at = excluded.last_failure_at, locked_until = excluded.locked_until
            """)

    /// Forgets an account's total and one pair's sign-in failures.
    static let clearSignInFailures = StoreWrite(
        .signInFailures, sql: "DELETE FROM sign_in_failures WHERE account_key = ? AND address_key IN ('', ?)")

    /// Links an email and password to a guest, detaching it from its installation.
    static let linkCredentials = StoreWrite(
        .users, sql: "UPDATE users SET email = ?, password_hash = ?, installation = NULL WHERE id = ?")

    /// Deletes the responses stored under an account's scope.
    static let deleteAccountResponses = StoreWrite(.idempotencyKeys, sql: "DELETE FROM idempotency_keys WHERE scope = ?")

    /// Deletes an account, and through `ON DELETE CASCADE` everything that belongs to it (the guests merged into it,
    /// with theirs); its purchases and subscriptions stay, of no account (`ON DELETE SET NULL`).
    static let deleteUser = StoreWrite(
        .users, .accountCodes, .appAttestKeys, .consumptionConsents, .documents, .holds, .ledgerEntries,
        .merges, .purchases, .quotaCounters, .refreshTokens, .sessions, .subscriptions, .syncClients, .syncState,
        .unattestedSpends, .wallets,
        sql: "DELETE FROM users WHERE id = ?")

    /// Issues (or replaces) an account's code of one purpose.
    static let issueAccountCode = StoreWrite(
        .accountCodes,
        sql: """
            INSERT INTO account_codes (user_id, purpose, code_hash, expires_at, failed_attempts, created_at)
            VALUES (?, ?, ?, ?, 0, ?)
            ON CONFLICT (user_id, purpose) DO UPDATE SET code_hash = excluded.code_hash,
              expires_at = excluded.expires_at, failed_attempts = 0, created_at = excluded.created_at
            """)

    /// Counts a wrong attempt at an account code.
    static let countWrongCode = StoreWrite(
        .accountCodes, sql: "UPDATE account_codes SET failed_attempts = ? WHERE user_id = ? AND purpose = ?")

    /// Deletes an account's code of one purpose.
    static let deleteAccountCode = StoreWrite(.accountCodes, sql: "DELETE FROM account_codes WHERE user_id = ? AND purpose = ?")

    /// Sets a password after a reset, marking the email verified.
    static let resetPassword = StoreWrite(
        .users, sql: "UPDATE users SET password_hash = ?, email_verified_at = coalesce(email_verified_at, ?) WHERE id = ?")

    /// Marks an account's email verified.
    static let verifyEmail = StoreWrite(
        .users, sql: "UPDATE users SET email_verified_at = coalesce(email_verified_at, ?) WHERE id = ? AND email IS NOT NULL")

    /// Changes an account's password.
    static let changePassword = StoreWrite(.users, sql: "UPDATE users SET password_hash = ? WHERE id = ? AND email IS NOT NULL")

    // MARK: Maintenance (SQLiteStore, +Leases)

    /// Creates a server-wide secret.
    static let createSecret = StoreWrite(.serverSecrets, sql: "INSERT INTO server_secrets (name, value) VALUES (?, ?)")

    /// Deletes idempotency records older than a cutoff.
    static let purgeResponses = StoreWrite(.idempotencyKeys, sql: "DELETE FROM idempotency_keys WHERE created_at < ?")

    /// Deletes guest sign-up records older than a cutoff.
    static let purgeGuestSignups = StoreWrite(.guestSignups, sql: "DELETE FROM guest_signups WHERE created_at < ?")

    /// Deletes sign-in failures older than a cutoff.
    static let purgeSignInFailures = StoreWrite(.signInFailures, sql: "DELETE FROM sign_in_failures WHERE last_failure_at < ?")

    /// Takes a lease unless another holder's runs on.
    static let takeLease = StoreWrite(
        .leases,
        sql: """
            INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?)
            ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
            WHERE leases.expires_at <= ? OR leases.holder = excluded.holder
            """)

    /// Ends a holder's lease.
    static let releaseLease = StoreWrite(.leases, sql: "DELETE FROM leases WHERE name = ? AND holder = ?")

    // MARK: Every declaration

    /// Every declaration above and in `SQLiteWrites+Purchases.swift`, by name: what the cache property test must see
    /// run (a test checks that the list names each `StoreWrite(` of these files once).
    static let all: [(name: String, write: StoreWrite)] = [
        ("moveWallet", moveWallet),
        ("appendEntry", appendEntry),
        ("rememberResponse", rememberResponse),
        ("openHold", openHold),
        ("settleHold", settleHold),
        ("storeQuotaCounter", storeQuotaCounter),
        ("storeInstallationCounter", storeInstallationCounter),
        ("changeProfile", changeProfile),
        ("recordInstallation", recordInstallation),
        ("createGuest", createGuest),
        ("createAppleAccount", createAppleAccount),
        ("createWallet", createWallet),
        ("recordGuestSignup", recordGuestSignup),
        ("openSession", openSession),
        ("revokeSession", revokeSession),
        ("revokeSessionsOfUser", revokeSessionsOfUser),
        ("deleteSession", deleteSession),
        ("issueRefreshToken", issueRefreshToken),
        ("useRefreshToken", useRefreshToken),
        ("deleteRefreshToken", deleteRefreshToken),
        ("storeSignInFailures", storeSignInFailures),
        ("clearSignInFailures", clearSignInFailures),
        ("linkCredentials", linkCredentials),
        ("deleteAccountResponses", deleteAccountResponses),
        ("deleteUser", deleteUser),
        ("issueAccountCode", issueAccountCode),
        ("countWrongCode", countWrongCode),
        ("deleteAccountCode", deleteAccountCode),
        ("resetPassword", resetPassword),
        ("verifyEmail", verifyEmail),
        ("changePassword", changePassword),
        ("createSecret", createSecret),
        ("purgeResponses", purgeResponses),
        ("purgeGuestSignups", purgeGuestSignups),
        ("purgeSignInFailures", purgeSignInFailures),
        ("takeLease", takeLease),
        ("releaseLease", releaseLease),
        ("recordNotification", recordNotification),
        ("dropUnownedListings", dropUnownedListings),
        ("storeConsumable", storeConsumable),
        ("listSubscription", listSubscription),
        ("storeSubscription", storeSubscription),
        ("setPurchasedPremium", setPurchasedPremium),
        ("moveHold", moveHold),
        ("markMerged", markMerged),
        ("setMergedPremium", setMergedPremium),
        ("dropListedTwice", dropListedTwice),
        ("movePurchases", movePurchases),
        ("moveSubscriptions", moveSubscriptions),
        ("mergeDocument", mergeDocument),
        ("deleteUserDocuments", deleteUserDocuments),
        ("storeMergedSync", storeMergedSync),
        ("emptyGuestSync", emptyGuestSync),
        ("moveSyncClients", moveSyncClients),
        ("recordMerge", recordMerge),
        ("writeDocument", writeDocument),
        ("storeSyncState", storeSyncState),
        ("storeSyncClient", storeSyncClient),
        ("purgeTombstone", purgeTombstone),
        ("notePurgedTombstones", notePurgedTombstones),
        ("purgeSyncClients", purgeSyncClients),
        ("useAppleToken", useAppleToken),
        ("linkApple", linkApple),
        ("revokeAppleConsent", revokeAppleConsent),
        ("storeAppleContact", storeAppleContact),
        ("unlinkApple", unlinkApple),
        ("recordAppleNotice", recordAppleNotice),
        ("purgeAppleTokenUses", purgeAppleTokenUses),
        ("purgeAppleNotices", purgeAppleNotices),
        ("issueChallenge", issueChallenge),
        ("consumeChallenge", consumeChallenge),
        ("purgeChallenges", purgeChallenges),
        ("saveAttestedKey", saveAttestedKey),
        ("advanceAssertionCounter", advanceAssertionCounter),
        ("countUnattestedSpend", countUnattestedSpend),
        ("setConsumptionConsent", setConsumptionConsent),
        ("queueConsumptionRequest", queueConsumptionRequest),
        ("finishConsumptionAttempt", finishConsumptionAttempt),
        ("recordRefundDecision", recordRefundDecision),
        ("appendAudit", appendAudit),
    ]
}
