/// The PostgreSQL schema, one migration per version: the SQLite schema (`Schema.swift` of TallySQLite)
/// translated statement by statement. Invariants live here as constraints, so a bug in Swift cannot
/// write a negative balance or a hold charged twice.
///
/// Integers and millisecond timestamps are `BIGINT`, response bodies `BYTEA`. Every statement is
/// constant text, executed one at a time inside the migration transaction.
enum PostgresSchema {
    /// A schema version and the statements that reach it from the previous one.
    struct Migration: Sendable {
        let version: Int
        let statements: [String]
    }

    /// Records which versions are applied; created (if missing) under the migration lock.
    static let versionTable = """
        CREATE TABLE IF NOT EXISTS tally_schema_migrations (
          version INT PRIMARY KEY,
          applied_at BIGINT NOT NULL
        )
        """

    /// Records a migration as applied (`$1` its version, `$2` the time): the migrations' own bookkeeping, in the
    /// migration's transaction, like their statements (no cache reads it).
    static let recordMigration = "INSERT INTO tally_schema_migrations (version, applied_at) VALUES ($1, $2)"

    /// Every migration, oldest first.
    static let migrations: [Migration] = [
        Migration(version: 1, statements: v1), Migration(version: 2, statements: v2), Migration(version: 3, statements: v3),
        Migration(version: 4, statements: v4), Migration(version: 5, statements: v5), Migration(version: 6, statements: v6),
        Migration(version: 7, statements: v7), Migration(version: 8, statements: v8), Migration(version: 9, statements: v9),
        Migration(version: 10, statements: v10), Migration(version: 11, statements: v11), Migration(version: 12, statements: v12),
        Migration(version: 13, statements: v13), Migration(version: 14, statements: v14),
        Migration(version: 15, statements: v15), Migration(version: 16, statements: v16),
        Migration(version: 17, statements: consumptionRequests), Migration(version: 18, statements: attestation),
        Migration(version: 19, statements: v19),
    ]

    /// A merge's summary is a JSON object, as SQLite's `merges` has held it to from the start (its
    /// `CHECK (json_type(summary) = 'object')`; PostgreSQL's table had no CHECK): found by `SchemaParityTests`.
    static let v19: [String] = [
        "ALTER TABLE merges ADD CONSTRAINT merges_summary_object CHECK (jsonb_typeof(summary::JSONB) = 'object')",
    ]

    /// Holds of 0 tokens (a premium user's AI call on a `premium: free` or quota model), as SQLite's "v14".
    static let v16: [String] = [
        "ALTER TABLE holds DROP CONSTRAINT holds_amount_check, ADD CONSTRAINT holds_amount_check CHECK (amount >= 0)",
    ]

    /// Sign in with Apple taken once and in order (`AppleIdentityStore`), as SQLite's "v12":
    /// - `users.apple_consent_revoked_at`: Apple's `consent-revoked` leaves the identity linked and marks when (only
    ///   with an identity); the next sign-in with it clears the mark and moves `apple_linked_at` to its time.
    /// - `apple_notifications`: the account notifications taken, by `jti` (inserted first in the transaction that acts
    ///   on one, so a copy on another process waits for it and then finds it), kept until `keep_until`.
    /// - `apple_token_uses`: each identity token signed in with, by `sub` and digest, kept until its `exp`;
    ///   `merging_guest` (plain text: the guest's deletion must not free the token) is the guest whose merge it was for,
    ///   the only caller that may use it again.
    static let v14: [String] = [
        """
        ALTER TABLE users ADD COLUMN apple_consent_revoked_at BIGINT,
          ADD CONSTRAINT users_apple_consent_revoked CHECK (apple_consent_revoked_at IS NULL OR apple_sub IS NOT NULL)
        """,
        """
        CREATE TABLE apple_notifications (
          jti TEXT PRIMARY KEY,
          keep_until BIGINT NOT NULL,
          received_at BIGINT NOT NULL
        )
        """,
        "CREATE INDEX apple_notifications_keep_until ON apple_notifications(keep_until)",
        """
        CREATE TABLE apple_token_uses (
          subject TEXT NOT NULL,
          digest TEXT NOT NULL CHECK (length(digest) = 64),
          expires_at BIGINT NOT NULL,
          merging_guest TEXT,
          used_at BIGINT NOT NULL,
          PRIMARY KEY (subject, digest)
        )
        """,
        "CREATE INDEX apple_token_uses_expires ON apple_token_uses(expires_at)",
    ]

    /// Purchase statuses that tell the truth, Sandbox bounds and refunds after reversals, as SQLite's "v13":
    /// - `subscriptions.transaction_id` (the transaction of the newest fact applied) and `revocation` (why `revoked_at`
    ///   is set: `refund` or `revoke`, from the newest REFUND or REVOKE notification recorded).
    /// - `purchases` holds a subscription once per account that listed it, keyed by its original transaction, its state
    ///   the subscription's alone; the primary key becomes two unique indexes (a consumable's transaction, a
    ///   subscription's original transaction and account).
    /// - `purchases.refunds`: how many refunds a consumable had (the n-th's entries reference `<transaction>#n` from
    ///   the second).
    static let v15: [String] = [
        "ALTER TABLE subscriptions ADD COLUMN transaction_id TEXT, ADD COLUMN revocation TEXT CHECK (revocation IN ('refund', 'revoke'))",
        """
        UPDATE subscriptions s SET
          transaction_id = coalesce((SELECT p.transaction_id FROM purchases p WHERE p.original_transaction_id = s.original_transaction_id
                                     ORDER BY p.expires_at DESC, p.purchased_at DESC, p.transaction_id DESC LIMIT 1), s.original_transaction_id),
          revocation = CASE WHEN s.revoked_at IS NULL THEN NULL
            WHEN (SELECT n.type FROM purchase_notifications n JOIN purchases p ON p.transaction_id = n.transaction_id
                  WHERE p.original_transaction_id = s.original_transaction_id AND n.type IN ('REFUND', 'REVOKE')
                  ORDER BY n.signed_at DESC LIMIT 1) = 'REVOKE' THEN 'revoke'
            ELSE 'refund' END
        """,
        """
        ALTER TABLE subscriptions ALTER COLUMN transaction_id SET NOT NULL,
          ADD CONSTRAINT subscriptions_revoked_check CHECK ((revoked_at IS NULL) = (revocation IS NULL))
        """,
        "CREATE INDEX subscriptions_transaction ON subscriptions(transaction_id)",
        "ALTER TABLE purchases DROP CONSTRAINT purchases_pkey, ADD COLUMN refunds BIGINT NOT NULL DEFAULT 0 CHECK (refunds >= 0)",
        "UPDATE purchases SET refunds = 1 WHERE refunded_tokens IS NOT NULL",
        // Drops the CHECK tying a subscription to its `expires_at` with the column (its state is the subscription's).
        "ALTER TABLE purchases DROP COLUMN expires_at",
        """
        WITH gone AS (DELETE FROM purchases WHERE kind = 'subscription' RETURNING *), listed AS (
          SELECT g.original_transaction_id, min(g.product_id) AS product_id, min(g.environment) AS environment, g.user_id,
                 min(g.purchased_at) AS purchased_at, min(g.recorded_at) AS recorded_at
          FROM gone g LEFT JOIN subscriptions s ON s.original_transaction_id = g.original_transaction_id
          WHERE g.user_id IS NOT NULL OR s.user_id IS NULL
          GROUP BY g.original_transaction_id, g.user_id
          UNION ALL
          SELECT s.original_transaction_id, s.product_id, s.environment, s.user_id,
                 coalesce((SELECT min(g.purchased_at) FROM gone g WHERE g.original_transaction_id = s.original_transaction_id), s.expires_at),
                 coalesce((SELECT min(g.recorded_at) FROM gone g WHERE g.original_transaction_id = s.original_transaction_id), s.signed_at)
          FROM subscriptions s
          WHERE s.user_id IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM gone g WHERE g.original_transaction_id = s.original_transaction_id AND g.user_id = s.user_id)
        )
        INSERT INTO purchases (transaction_id, original_transaction_id, product_id, kind, quantity, tokens, environment, user_id,
          claimed, purchased_at, revoked_at, refunded_tokens, refunds, reversed_at, signed_at, recorded_at)
        SELECT original_transaction_id, original_transaction_id, product_id, 'subscription', 1, NULL, environment, user_id, false,
               purchased_at, NULL, NULL, 0, NULL, NULL, recorded_at
        FROM listed
        """,
        """
        ALTER TABLE purchases
          ADD CONSTRAINT purchases_subscription_check CHECK (kind = 'consumable' OR (transaction_id = original_transaction_id
            AND NOT claimed AND revoked_at IS NULL AND refunds = 0 AND reversed_at IS NULL AND signed_at IS NULL)),
          ADD CONSTRAINT purchases_refunded_check CHECK ((refunds = 0) = (refunded_tokens IS NULL))
        """,
        "DROP INDEX purchases_original",
        "CREATE UNIQUE INDEX purchases_consumable ON purchases(transaction_id) WHERE kind = 'consumable'",
        "CREATE UNIQUE INDEX purchases_subscription ON purchases(original_transaction_id, user_id) WHERE kind = 'subscription'",
    ]

    /// The operator's console (`ConsoleStore`), as SQLite's "v11":
    /// - `console_audit`: every admin action, append-only — a trigger refuses an update or a delete of a row (and
    ///   `TRUNCATE`), so the log can only grow; `user_id` is plain text, so a user's deletion keeps its rows.
    /// - `users_created`: the newest-users list and the overview's new users are ranges on it; `sessions_user_created`
    ///   lists an account's sessions newest first.
    /// - `ledger_entries_created`: a BRIN index (entries are appended in time order), which costs the ledger's writers
    ///   next to nothing, for the overview's "today" and "7 days" ranges.
    static let v13: [String] = [
        """
        CREATE TABLE console_audit (
          id BIGSERIAL PRIMARY KEY,
          at BIGINT NOT NULL,
          operator_session TEXT NOT NULL CHECK (length(operator_session) BETWEEN 1 AND 100),
          action TEXT NOT NULL CHECK (action IN ('grant', 'premium', 'revoke_sessions', 'delete_user')),
          user_id TEXT,
          before TEXT,
          after TEXT
        )
        """,
        """
        CREATE FUNCTION console_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          RAISE EXCEPTION 'console_audit is append-only' USING ERRCODE = 'integrity_constraint_violation';
        END
        $$
        """,
        """
        CREATE TRIGGER console_audit_append_only BEFORE UPDATE OR DELETE ON console_audit
        FOR EACH ROW EXECUTE FUNCTION console_audit_append_only()
        """,
        """
        CREATE TRIGGER console_audit_no_truncate BEFORE TRUNCATE ON console_audit
        FOR EACH STATEMENT EXECUTE FUNCTION console_audit_append_only()
        """,
        "CREATE INDEX users_created ON users(created_at, id)",
        "CREATE INDEX sessions_user_created ON sessions(user_id, created_at)",
        "CREATE INDEX ledger_entries_created ON ledger_entries USING brin (created_at)",
    ]

    /// Apple identities (`AppleIdentityStore`) and merging a guest into an account (`MergeStore`), as SQLite's "v10":
    /// - `users.apple_sub`: Apple's stable user id, unique, the identity (never the email); `apple_email` only a contact,
    ///   `apple_refresh_token` opaque text to revoke at deletion, both only with an identity. An account with one has no
    ///   installation (linking detaches a guest, as linking an email does).
    /// - `users.merged_into`: the account a guest was merged into; a merged guest has no way in left (no installation,
    ///   email or Apple identity) and goes with that account. `merges` keeps each merge's summary, once per guest.
    /// - Ledger kinds `merge_out` (on the guest, reference: the account) and `merge_in` (on the account, reference: the
    ///   guest), no held change, each once per guest (unique indexes, so two processes cannot both merge); a negative
    ///   `merge_in` (a guest's debt) must leave the account with something available, as every entry but a refund must.
    static let v12: [String] = [
        """
        ALTER TABLE users
          ADD COLUMN apple_sub TEXT, ADD COLUMN apple_email TEXT, ADD COLUMN apple_refresh_token TEXT, ADD COLUMN apple_linked_at BIGINT,
          ADD COLUMN merged_into TEXT REFERENCES users(id) ON DELETE CASCADE,
          ADD CONSTRAINT users_apple_sub_key UNIQUE (apple_sub),
          ADD CONSTRAINT users_apple_installation CHECK (apple_sub IS NULL OR installation IS NULL),
          ADD CONSTRAINT users_apple_contact CHECK (apple_sub IS NOT NULL OR (apple_email IS NULL AND apple_refresh_token IS NULL)),
          ADD CONSTRAINT users_apple_linked_at CHECK ((apple_linked_at IS NULL) = (apple_sub IS NULL)),
          ADD CONSTRAINT users_merged CHECK (
            merged_into IS NULL OR (merged_into <> id AND email IS NULL AND apple_sub IS NULL AND installation IS NULL))
        """,
        "CREATE INDEX users_merged_into ON users(merged_into) WHERE merged_into IS NOT NULL",
        """
        CREATE TABLE merges (
          guest_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
          account_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          summary TEXT NOT NULL,
          merged_at BIGINT NOT NULL,
          CHECK (guest_id <> account_id)
        )
        """,
        "CREATE INDEX merges_account ON merges(account_id)",
        """
        ALTER TABLE ledger_entries
          DROP CONSTRAINT ledger_entries_kind_check,
          DROP CONSTRAINT ledger_entries_reference_check,
          DROP CONSTRAINT ledger_entries_purchase_amounts_check,
          ADD CONSTRAINT ledger_entries_kind_check CHECK (kind IN (
            'grant', 'debit', 'hold', 'capture', 'release', 'expire', 'purchase', 'refund', 'refund_reversed', 'premium',
            'merge_out', 'merge_in')),
          ADD CONSTRAINT ledger_entries_reference_check CHECK (
            (reference IS NOT NULL) = (kind IN ('purchase', 'refund', 'refund_reversed', 'premium', 'merge_out', 'merge_in'))),
          ADD CONSTRAINT ledger_entries_purchase_amounts_check CHECK (
            (kind NOT IN ('purchase', 'refund', 'refund_reversed', 'premium', 'merge_out', 'merge_in') OR held_change = 0)
            AND (kind <> 'purchase' OR amount > 0) AND (kind <> 'refund' OR amount <= 0)
            AND (kind <> 'refund_reversed' OR amount >= 0) AND (kind <> 'premium' OR amount = 0)),
          ADD CONSTRAINT ledger_entries_merge_check CHECK (kind NOT IN ('merge_out', 'merge_in') OR reference <> user_id)
        """,
        "CREATE UNIQUE INDEX ledger_entries_merge_out_once ON ledger_entries(user_id) WHERE kind = 'merge_out'",
        "CREATE UNIQUE INDEX ledger_entries_merge_in_once ON ledger_entries(reference) WHERE kind = 'merge_in'",
    ]

    /// App Store purchases (`PurchaseStore`), as SQLite's "v9", for data already stored too:
    /// - What is available (`balance - held`) may go below zero through a refund only, or stay below it through an
    ///   entry that does not lower it (`WalletState.admits`): the wallet keeps `held >= 0` alone, and each entry's
    ///   after-values carry the rule. New kinds `purchase`, `refund`, `refund_reversed`, `premium` (amount 0), each
    ///   with a `reference` (the transaction; a premium change's original transaction); one credit, at most one refund
    ///   and one reversal per transaction id are unique indexes, so two processes cannot both credit.
    /// - `users.purchased_premium_until`: the latest end of the subscriptions the account holds.
    /// - `purchases`, `subscriptions` (its premium's end a generated column) and `purchase_notifications`.
    static let v11: [String] = [
        // v1's checks, as PostgreSQL named them (one naming two columns takes the table's name alone).
        "ALTER TABLE wallets DROP CONSTRAINT wallets_balance_check, DROP CONSTRAINT wallets_check",
        "ALTER TABLE wallets ADD CONSTRAINT wallets_held_check CHECK (held >= 0)",
        """
        ALTER TABLE ledger_entries
          DROP CONSTRAINT ledger_entries_kind_check,
          DROP CONSTRAINT ledger_entries_balance_after_check,
          DROP CONSTRAINT ledger_entries_check,
          ADD COLUMN reference TEXT
        """,
        """
        ALTER TABLE ledger_entries
          ADD CONSTRAINT ledger_entries_kind_check CHECK (kind IN (
            'grant', 'debit', 'hold', 'capture', 'release', 'expire', 'purchase', 'refund', 'refund_reversed', 'premium')),
          ADD CONSTRAINT ledger_entries_held_after_check CHECK (held_after >= 0),
          ADD CONSTRAINT ledger_entries_available_check CHECK (held_after <= balance_after OR kind = 'refund' OR amount >= held_change),
          ADD CONSTRAINT ledger_entries_reference_check
            CHECK ((reference IS NOT NULL) = (kind IN ('purchase', 'refund', 'refund_reversed', 'premium'))),
          ADD CONSTRAINT ledger_entries_purchase_amounts_check CHECK (
            (kind NOT IN ('purchase', 'refund', 'refund_reversed', 'premium') OR held_change = 0)
            AND (kind <> 'purchase' OR amount > 0) AND (kind <> 'refund' OR amount <= 0)
            AND (kind <> 'refund_reversed' OR amount >= 0) AND (kind <> 'premium' OR amount = 0))
        """,
        "CREATE UNIQUE INDEX ledger_entries_purchase_once ON ledger_entries(reference) WHERE kind = 'purchase'",
        "CREATE UNIQUE INDEX ledger_entries_refund_once ON ledger_entries(reference) WHERE kind = 'refund'",
        "CREATE UNIQUE INDEX ledger_entries_reversal_once ON ledger_entries(reference) WHERE kind = 'refund_reversed'",
        "ALTER TABLE users ADD COLUMN purchased_premium_until BIGINT",
        """
        CREATE TABLE purchases (
          transaction_id TEXT PRIMARY KEY,
          original_transaction_id TEXT NOT NULL,
          product_id TEXT NOT NULL,
          kind TEXT NOT NULL CHECK (kind IN ('consumable', 'subscription')),
          quantity BIGINT NOT NULL CHECK (quantity > 0),
          tokens BIGINT CHECK (tokens > 0),
          environment TEXT NOT NULL,
          user_id TEXT REFERENCES users(id) ON DELETE SET NULL,
          claimed BOOLEAN NOT NULL,
          purchased_at BIGINT NOT NULL,
          expires_at BIGINT,
          revoked_at BIGINT,
          refunded_tokens BIGINT CHECK (refunded_tokens >= 0 AND refunded_tokens <= tokens),
          reversed_at BIGINT,
          signed_at BIGINT,
          recorded_at BIGINT NOT NULL,
          CHECK ((kind = 'consumable') = (tokens IS NOT NULL)),
          CHECK ((kind = 'subscription') = (expires_at IS NOT NULL)),
          CHECK (kind = 'consumable' OR (NOT claimed AND refunded_tokens IS NULL AND reversed_at IS NULL)),
          CHECK (kind = 'subscription' OR claimed OR user_id IS NULL OR revoked_at IS NOT NULL),
          CHECK (kind = 'subscription' OR revoked_at IS NULL OR refunded_tokens IS NOT NULL),
          CHECK (reversed_at IS NULL OR (refunded_tokens IS NOT NULL AND revoked_at IS NULL))
        )
        """,
        "CREATE INDEX purchases_user ON purchases(user_id, purchased_at, transaction_id)",
        "CREATE INDEX purchases_unclaimed ON purchases(purchased_at, transaction_id) WHERE user_id IS NULL AND NOT claimed",
        "CREATE INDEX purchases_original ON purchases(original_transaction_id)",
        """
        CREATE TABLE subscriptions (
          original_transaction_id TEXT PRIMARY KEY,
          product_id TEXT NOT NULL,
          environment TEXT NOT NULL,
          user_id TEXT REFERENCES users(id) ON DELETE SET NULL,
          expires_at BIGINT NOT NULL,
          grace_until BIGINT,
          revoked_at BIGINT,
          signed_at BIGINT NOT NULL,
          premium_until BIGINT NOT NULL GENERATED ALWAYS AS (LEAST(GREATEST(expires_at, grace_until), revoked_at)) STORED
        )
        """,
        "CREATE INDEX subscriptions_user ON subscriptions(user_id)",
        """
        CREATE TABLE purchase_notifications (
          uuid TEXT PRIMARY KEY,
          type TEXT NOT NULL,
          transaction_id TEXT,
          signed_at BIGINT NOT NULL,
          received_at BIGINT NOT NULL
        )
        """,
    ]

    /// Account recovery: when a user proved their email (`users.email_verified_at`, only with an email), and the
    /// single-use codes mailed for a password reset or an email verification (`account_codes`: one live code per user
    /// and purpose, a new one replaces it; only a keyed hash of the code; deleted with the account).
    static let v10: [String] = [
        "ALTER TABLE users ADD COLUMN email_verified_at BIGINT CONSTRAINT users_email_verified_check CHECK (email_verified_at IS NULL OR email IS NOT NULL)",
        """
        CREATE TABLE account_codes (
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          purpose TEXT NOT NULL CHECK (purpose IN ('password_reset', 'email_verification')),
          code_hash TEXT NOT NULL,
          expires_at BIGINT NOT NULL,
          failed_attempts INT NOT NULL DEFAULT 0 CHECK (failed_attempts >= 0),
          created_at BIGINT NOT NULL,
          PRIMARY KEY (user_id, purpose)
        )
        """,
    ]

    /// Each user's sync budget (`SyncBudget`): what their documents take, counted in `sync_state` by every
    /// document write and tombstone purge (documents, tombstones included, and the bytes of their data; counted
    /// here once for the rows already stored), and an index for the purge of idle sync clients.
    static let v8: [String] = [
        "ALTER TABLE sync_state ADD COLUMN stored_documents BIGINT NOT NULL DEFAULT 0 CHECK (stored_documents >= 0)",
        "ALTER TABLE sync_state ADD COLUMN stored_bytes BIGINT NOT NULL DEFAULT 0 CHECK (stored_bytes >= 0)",
        """
        UPDATE sync_state s SET stored_documents = d.documents, stored_bytes = d.bytes
        FROM (SELECT user_id, count(*) AS documents, sum(octet_length(data)) AS bytes FROM documents GROUP BY user_id) d
        WHERE s.user_id = d.user_id
        """,
        "CREATE INDEX sync_clients_idle ON sync_clients(updated_at)",
    ]

    /// The server processes running on the database (``InstanceHeartbeat``): keyed fingerprints of their keys,
    /// never the keys, so that a process whose keys disagree refuses to start (``KeyAgreement``).
    static let v9: [String] = [
        """
        CREATE TABLE server_instances (
          id TEXT PRIMARY KEY,
          host TEXT NOT NULL,
          pid BIGINT NOT NULL,
          signing_keys TEXT[] NOT NULL CHECK (cardinality(signing_keys) >= 1),
          admin_key TEXT NOT NULL,
          started_at BIGINT NOT NULL,
          seen_at BIGINT NOT NULL
        )
        """,
    ]

    /// Leases (`LeaseStore`): which process computes a thing computed once (a daily AI generation) until when.
    static let v7: [String] = [
        """
        CREATE TABLE leases (
          name TEXT PRIMARY KEY,
          holder TEXT NOT NULL,
          expires_at BIGINT NOT NULL
        )
        """,
    ]

    static let v1: [String] = [
        """
        CREATE TABLE users (
          id TEXT PRIMARY KEY,
          email TEXT,
          password_hash TEXT,
          timezone TEXT NOT NULL DEFAULT 'UTC',
          language TEXT,
          premium_until BIGINT,
          created_at BIGINT NOT NULL,
          CONSTRAINT users_email_key UNIQUE (email),
          CHECK ((email IS NULL) = (password_hash IS NULL))
        )
        """,
        """
        CREATE TABLE device_credentials (
          device_hash TEXT PRIMARY KEY,
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          created_at BIGINT NOT NULL
        )
        """,
        "CREATE INDEX device_credentials_user ON device_credentials(user_id)",
        """
        CREATE TABLE guest_signups (
          ip_hash TEXT NOT NULL,
          created_at BIGINT NOT NULL
        )
        """,
        "CREATE INDEX guest_signups_ip ON guest_signups(ip_hash, created_at)",
        """
        CREATE TABLE sessions (
          id TEXT PRIMARY KEY,
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          created_at BIGINT NOT NULL,
          revoked_at BIGINT
        )
        """,
        "CREATE INDEX sessions_user ON sessions(user_id)",
        """
        CREATE TABLE refresh_tokens (
          token_hash TEXT PRIMARY KEY,
          session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
          expires_at BIGINT NOT NULL,
          used_at BIGINT
        )
        """,
        "CREATE INDEX refresh_tokens_session ON refresh_tokens(session_id)",
        // Updated on every ledger entry: leave room on each page for HOT updates.
        """
        CREATE TABLE wallets (
          user_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
          balance BIGINT NOT NULL CHECK (balance >= 0),
          held BIGINT NOT NULL CHECK (held >= 0 AND held <= balance),
          version BIGINT NOT NULL CHECK (version >= 0)
        ) WITH (fillfactor = 80)
        """,
        """
        CREATE TABLE ledger_entries (
          id BIGINT GENERATED ALWAYS AS IDENTITY (SEQUENCE NAME ledger_entries_id_seq) PRIMARY KEY,
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          kind TEXT NOT NULL CHECK (kind IN ('grant', 'debit', 'hold', 'capture', 'release', 'expire')),
          amount BIGINT NOT NULL,
          held_change BIGINT NOT NULL,
          balance_after BIGINT NOT NULL CHECK (balance_after >= 0),
          held_after BIGINT NOT NULL CHECK (held_after >= 0 AND held_after <= balance_after),
          reason TEXT,
          created_at BIGINT NOT NULL
        )
        """,
        "CREATE INDEX ledger_entries_user ON ledger_entries(user_id, id)",
        """
        CREATE TABLE holds (
          id TEXT PRIMARY KEY,
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          amount BIGINT NOT NULL CHECK (amount > 0),
          status TEXT NOT NULL CHECK (status IN ('open', 'captured', 'released', 'expired')),
          captured_amount BIGINT CHECK (captured_amount >= 0 AND captured_amount <= amount),
          created_at BIGINT NOT NULL,
          expires_at BIGINT NOT NULL,
          settled_at BIGINT,
          CHECK ((status = 'captured') = (captured_amount IS NOT NULL)),
          CHECK ((status = 'open') = (settled_at IS NULL))
        )
        """,
        "CREATE INDEX holds_open ON holds(expires_at) WHERE status = 'open'",
        "CREATE INDEX holds_user ON holds(user_id, status)",
        """
        CREATE TABLE quota_counters (
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          quota TEXT NOT NULL,
          used BIGINT NOT NULL CHECK (used >= 0),
          window_end BIGINT NOT NULL,
          PRIMARY KEY (user_id, quota)
        ) WITH (fillfactor = 80)
        """,
        """
        CREATE TABLE idempotency_keys (
          scope TEXT NOT NULL,
          key TEXT NOT NULL,
          fingerprint TEXT NOT NULL,
          status BIGINT NOT NULL,
          body BYTEA NOT NULL,
          created_at BIGINT NOT NULL,
          PRIMARY KEY (scope, key)
        )
        """,
        "CREATE INDEX idempotency_keys_created ON idempotency_keys(created_at)",
        """
        CREATE TABLE server_secrets (
          name TEXT PRIMARY KEY,
          value TEXT NOT NULL
        )
        """,
    ]

    /// The revocation feed (PostgreSQL only: an embedded database has one process, which sees its own
    /// revocations). Sessions revoked and accounts deleted (`session_id` NULL) are listed with the
    /// database's clock, so that every process can poll the last minute of them (``LiveSessions``).
    /// No foreign keys: a deleted account's row must outlive the account.
    static let v2: [String] = [
        """
        CREATE TABLE session_revocations (
          session_id TEXT,
          user_id TEXT NOT NULL,
          revoked_at BIGINT NOT NULL DEFAULT (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT
        )
        """,
        "CREATE INDEX session_revocations_time ON session_revocations(revoked_at)",
    ]

    /// Sign-in failures (the lockout, ``SignInPolicy``; `address_key` '' holds the account's failures across
    /// every address) and the indexes the session cap and the session purge read. New tables and indexes
    /// only: existing rows are kept as they are.
    static let v3: [String] = [
        """
        CREATE TABLE sign_in_failures (
          account_key TEXT NOT NULL,
          address_key TEXT NOT NULL,
          failures BIGINT NOT NULL CHECK (failures > 0),
          last_failure_at BIGINT NOT NULL,
          locked_until BIGINT,
          PRIMARY KEY (account_key, address_key),
          CHECK (address_key <> '' OR locked_until IS NULL)
        )
        """,
        "CREATE INDEX sign_in_failures_age ON sign_in_failures(last_failure_at)",
        "CREATE INDEX sessions_live ON sessions(user_id, created_at) WHERE revoked_at IS NULL",
        "CREATE INDEX sessions_revoked ON sessions(revoked_at) WHERE revoked_at IS NOT NULL",
        "CREATE INDEX refresh_tokens_expiry ON refresh_tokens(expires_at)",
    ]

    /// Access tokens are signed with keys kept outside the database (a dump must not yield them): forget
    /// the key that was stored here. Its tokens stop working; clients refresh.
    static let v4: [String] = ["DELETE FROM server_secrets WHERE name = 'jwt-hs256'"]

    /// Installations (`InstallationCounters` in TallyStore), as SQLite's "v4": the device secret's hash names
    /// an installation, which has at most one guest (`users.installation`, unique) and never a linked account
    /// (the `CHECK`: linking clears it), and quota counters of its own that every guest's free use is charged
    /// to as well. Existing device credentials become installations; a guest's becomes its installation, with
    /// its counters copied (so today's count goes on), and a linked account's is no longer its way in.
    static let v5: [String] = [
        """
        CREATE TABLE installations (
          id TEXT PRIMARY KEY,
          created_at BIGINT NOT NULL
        )
        """,
        """
        CREATE TABLE installation_quota_counters (
          installation TEXT NOT NULL REFERENCES installations(id) ON DELETE CASCADE,
          quota TEXT NOT NULL,
          used BIGINT NOT NULL CHECK (used >= 0),
          window_end BIGINT NOT NULL,
          PRIMARY KEY (installation, quota)
        ) WITH (fillfactor = 80)
        """,
        "ALTER TABLE users ADD COLUMN installation TEXT REFERENCES installations(id)",
        "ALTER TABLE users ADD CONSTRAINT users_installation_guest CHECK (installation IS NULL OR email IS NULL)",
        "ALTER TABLE users ADD CONSTRAINT users_installation_key UNIQUE (installation)",
        "INSERT INTO installations (id, created_at) SELECT device_hash, created_at FROM device_credentials",
        """
        UPDATE users u SET installation = d.device_hash
        FROM (SELECT user_id, min(device_hash) AS device_hash FROM device_credentials GROUP BY user_id) d
        WHERE d.user_id = u.id AND u.email IS NULL
        """,
        """
        INSERT INTO installation_quota_counters (installation, quota, used, window_end)
        SELECT u.installation, c.quota, c.used, c.window_end
        FROM quota_counters c JOIN users u ON u.id = c.user_id WHERE u.installation IS NOT NULL
        """,
        "DROP TABLE device_credentials",
    ]

    /// Synced collections (``DocumentStore``): new tables only, so existing rows are kept as they are, and every
    /// row goes with its user (`ON DELETE CASCADE`; a guest who links keeps its id, so its rows).
    /// - `sync_state`: a user's change counter (`version`, the newest version written) and the newest version
    ///   of a tombstone purged (`purged_through`: older cursors must resync). Its row lock serializes a user's
    ///   document writes across every process, so versions commit in order; created on the first write.
    /// - `documents`: the latest state of each document, a tombstone (`deleted`, `data` '') after a delete.
    ///   Ids and range values compare byte by byte (`COLLATE "C"`, as SQLite compares them), and a user's
    ///   versions are unique; the partial index serves range queries and live counts, the other one the purge.
    /// - `sync_clients`: each sync client's last mutation id, owned by the user who first pushed with it.
    static let v6: [String] = [
        """
        CREATE TABLE sync_state (
          user_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
          version BIGINT NOT NULL CHECK (version >= 0),
          purged_through BIGINT NOT NULL CHECK (purged_through >= 0 AND purged_through <= version)
        ) WITH (fillfactor = 80)
        """,
        """
        CREATE TABLE documents (
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          collection TEXT COLLATE "C" NOT NULL,
          id TEXT COLLATE "C" NOT NULL,
          data TEXT NOT NULL,
          range_value TEXT COLLATE "C",
          version BIGINT NOT NULL CHECK (version > 0),
          updated_at BIGINT NOT NULL,
          deleted BOOLEAN NOT NULL,
          PRIMARY KEY (user_id, collection, id),
          CONSTRAINT documents_version_key UNIQUE (user_id, version),
          CONSTRAINT documents_tombstone CHECK (deleted = (data = '') AND (NOT deleted OR range_value IS NULL)),
          CONSTRAINT documents_object CHECK (deleted OR left(data, 1) = '{')
        )
        """,
        "CREATE INDEX documents_live ON documents(user_id, collection, range_value, id) WHERE NOT deleted",
        "CREATE INDEX documents_tombstones ON documents(updated_at) WHERE deleted",
        """
        CREATE TABLE sync_clients (
          client_id TEXT PRIMARY KEY,
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          last_mutation_id BIGINT NOT NULL CHECK (last_mutation_id >= 0),
          updated_at BIGINT NOT NULL
        )
        """,
        "CREATE INDEX sync_clients_user ON sync_clients(user_id)",
    ]
}
