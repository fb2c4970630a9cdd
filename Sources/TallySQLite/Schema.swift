import GRDB

/// The SQLite schema, one migration per version. Invariants live here as constraints,
/// so a bug in Swift cannot write a negative balance or a hold charged twice.
enum Schema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: v1)
        }
        migrator.registerMigration("v2") { db in
            try db.execute(sql: v2)
        }
        // Access tokens are signed with keys kept outside the database (a dump must not yield them):
        // forget the key that was stored here. Its tokens stop working; clients refresh.
        migrator.registerMigration("v3") { db in
            try db.execute(sql: "DELETE FROM server_secrets WHERE name = 'jwt-hs256'")
        }
        migrator.registerMigration("v4") { db in
            try db.execute(sql: v4)
        }
        migrator.registerMigration("v5") { db in
            try db.execute(sql: v5)
        }
        migrator.registerMigration("v6") { db in
            try db.execute(sql: v6)
        }
        migrator.registerMigration("v7") { db in
            try db.execute(sql: v7)
        }
        migrator.registerMigration("v8") { db in
            try db.execute(sql: v8)
        }
        // Rebuilds `wallets` and `ledger_entries` (SQLite cannot change a CHECK in place), with foreign keys off
        // while it runs and checked after (GRDB's default for a migration).
        migrator.registerMigration("v9") { db in
            try db.execute(sql: v9)
        }
        // Rebuilds `ledger_entries` for the merge entries' rules, as "v9" did (ids and the id sequence kept).
        migrator.registerMigration("v10") { db in
            try db.execute(sql: v10)
        }
        migrator.registerMigration("v11") { db in
            try db.execute(sql: v11)
        }
        migrator.registerMigration("v12") { db in
            try db.execute(sql: v12)
        }
        // Rebuilds `purchases` and `subscriptions` (a primary key and CHECKs change), as "v9" rebuilt the ledger.
        migrator.registerMigration("v13") { db in
            try db.execute(sql: v13)
        }
        // Rebuilds `ledger_entries` with the same rules written without IN lists (ids and the id sequence kept).
        migrator.registerMigration("v14") { db in
            try db.execute(sql: v14)
        }
        // Rebuilds `holds` (a CHECK changes), as "v9" rebuilt the ledger.
        migrator.registerMigration("v15") { db in
            try db.execute(sql: v15)
        }
        migrator.registerMigration("v16") { db in
            try db.execute(sql: consumptionRequests)
        }
        migrator.registerMigration("v17") { db in
            try db.execute(sql: attestation)
        }
        return migrator
    }

    static let v1 = """
        CREATE TABLE users (
          id TEXT PRIMARY KEY NOT NULL,
          email TEXT UNIQUE,
          password_hash TEXT,
          timezone TEXT NOT NULL DEFAULT 'UTC',
          language TEXT,
          premium_until INTEGER,
          created_at INTEGER NOT NULL,
          CHECK ((email IS NULL) = (password_hash IS NULL))
        );
        CREATE TABLE device_credentials (
          device_hash TEXT PRIMARY KEY NOT NULL,
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          created_at INTEGER NOT NULL
        );
        CREATE INDEX device_credentials_user ON device_credentials(user_id);
        CREATE TABLE guest_signups (
          ip_hash TEXT NOT NULL,
          created_at INTEGER NOT NULL
        );
        CREATE INDEX guest_signups_ip ON guest_signups(ip_hash, created_at);
        CREATE TABLE sessions (
          id TEXT PRIMARY KEY NOT NULL,
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          created_at INTEGER NOT NULL,
          revoked_at INTEGER
        );
        CREATE INDEX sessions_user ON sessions(user_id);
        CREATE TABLE refresh_tokens (
          token_hash TEXT PRIMARY KEY NOT NULL,
          session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
          expires_at INTEGER NOT NULL,
          used_at INTEGER
        );
        CREATE INDEX refresh_tokens_session ON refresh_tokens(session_id);
        CREATE TABLE wallets (
          user_id TEXT PRIMARY KEY NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          balance INTEGER NOT NULL CHECK (balance >= 0),
          held INTEGER NOT NULL CHECK (held >= 0 AND held <= balance),
          version INTEGER NOT NULL CHECK (version >= 0)
        );
        CREATE TABLE ledger_entries (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          kind TEXT NOT NULL CHECK (kind IN ('grant', 'debit', 'hold', 'capture', 'release', 'expire')),
          amount INTEGER NOT NULL,
          held_change INTEGER NOT NULL,
          balance_after INTEGER NOT NULL CHECK (balance_after >= 0),
          held_after INTEGER NOT NULL CHECK (held_after >= 0 AND held_after <= balance_after),
          reason TEXT,
          created_at INTEGER NOT NULL
        );
        CREATE INDEX ledger_entries_user ON ledger_entries(user_id, id);
        CREATE TABLE holds (
          id TEXT PRIMARY KEY NOT NULL,
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          amount INTEGER NOT NULL CHECK (amount > 0),
          status TEXT NOT NULL CHECK (status IN ('open', 'captured', 'released', 'expired')),
          captured_amount INTEGER CHECK (captured_amount >= 0 AND captured_amount <= amount),
          created_at INTEGER NOT NULL,
          expires_at INTEGER NOT NULL,
          settled_at INTEGER,
          CHECK ((status = 'captured') = (captured_amount IS NOT NULL)),
          CHECK ((status = 'open') = (settled_at IS NULL))
        );
        CREATE INDEX holds_open ON holds(expires_at) WHERE status = 'open';
        CREATE INDEX holds_user ON holds(user_id, status);
        CREATE TABLE quota_counters (
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          quota TEXT NOT NULL,
          used INTEGER NOT NULL CHECK (used >= 0),
          window_end INTEGER NOT NULL,
          PRIMARY KEY (user_id, quota)
        );
        CREATE TABLE idempotency_keys (
          scope TEXT NOT NULL,
          key TEXT NOT NULL,
          fingerprint TEXT NOT NULL,
          status INTEGER NOT NULL,
          body BLOB NOT NULL,
          created_at INTEGER NOT NULL,
          PRIMARY KEY (scope, key)
        );
        CREATE INDEX idempotency_keys_created ON idempotency_keys(created_at);
        CREATE TABLE server_secrets (
          name TEXT PRIMARY KEY NOT NULL,
          value TEXT NOT NULL
        );
        """

    /// Sign-in failures (the lockout, ``SignInPolicy``) and the indexes the session cap and the session
    /// purge read. New tables and indexes only: existing rows are kept as they are.
    static let v2 = """
        CREATE TABLE sign_in_failures (
          account_key TEXT NOT NULL,
          address_key TEXT NOT NULL, -- '' for the account's failures across every address
          failures INTEGER NOT NULL CHECK (failures > 0),
          last_failure_at INTEGER NOT NULL,
          locked_until INTEGER,
          PRIMARY KEY (account_key, address_key),
          CHECK (address_key <> '' OR locked_until IS NULL)
        );
        CREATE INDEX sign_in_failures_age ON sign_in_failures(last_failure_at);
        CREATE INDEX sessions_live ON sessions(user_id, created_at) WHERE revoked_at IS NULL;
        CREATE INDEX sessions_revoked ON sessions(revoked_at) WHERE revoked_at IS NOT NULL;
        CREATE INDEX refresh_tokens_expiry ON refresh_tokens(expires_at);
        """

    /// Installations (`InstallationCounters` in TallyStore): the device secret's hash names an installation,
    /// which has at most one guest (`users.installation`, unique) and never a linked account (the `CHECK`:
    /// linking clears it), and quota counters of its own that every guest's free use is charged to as well.
    /// Existing device credentials become installations; a guest's becomes its installation, with its
    /// counters copied (so today's count goes on), and a linked account's is no longer its way in.
    static let v4 = """
        CREATE TABLE installations (
          id TEXT PRIMARY KEY NOT NULL, -- SHA-256 of the device secret
          created_at INTEGER NOT NULL
        );
        CREATE TABLE installation_quota_counters (
          installation TEXT NOT NULL REFERENCES installations(id) ON DELETE CASCADE,
          quota TEXT NOT NULL,
          used INTEGER NOT NULL CHECK (used >= 0),
          window_end INTEGER NOT NULL,
          PRIMARY KEY (installation, quota)
        );
        ALTER TABLE users ADD COLUMN installation TEXT REFERENCES installations(id)
          CONSTRAINT users_installation_guest CHECK (installation IS NULL OR email IS NULL);
        CREATE UNIQUE INDEX users_installation ON users(installation);
        INSERT INTO installations (id, created_at) SELECT device_hash, created_at FROM device_credentials;
        UPDATE users SET installation = (SELECT min(d.device_hash) FROM device_credentials d WHERE d.user_id = users.id)
        WHERE email IS NULL;
        INSERT INTO installation_quota_counters (installation, quota, used, window_end)
        SELECT u.installation, c.quota, c.used, c.window_end
        FROM quota_counters c JOIN users u ON u.id = c.user_id WHERE u.installation IS NOT NULL;
        DROP TABLE device_credentials;
        """

    /// Synced documents (`DocumentStore`): each user's documents, their change counter, and the sync clients'
    /// last mutation ids. New tables only: existing rows are kept as they are. A document row holds its latest
    /// state, a tombstone (`deleted = 1`, `data` NULL) after a delete; a user's versions are unique (the index),
    /// and a pull cursor below `purged_through` (the newest tombstone purged) must start again. Everything goes
    /// with its user (`ON DELETE CASCADE`); linking a guest keeps the user id, so it keeps everything.
    static let v5 = """
        CREATE TABLE documents (
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          collection TEXT NOT NULL,
          id TEXT NOT NULL,
          data TEXT, -- canonical JSON of an object; NULL on a tombstone
          range_value TEXT, -- the collection's range key's value; NULL on a tombstone or without a range key
          version INTEGER NOT NULL CHECK (version > 0),
          updated_at INTEGER NOT NULL,
          deleted INTEGER NOT NULL CHECK (deleted IN (0, 1)),
          PRIMARY KEY (user_id, collection, id),
          CHECK ((data IS NULL) = (deleted = 1)),
          CHECK (deleted = 0 OR range_value IS NULL),
          CHECK (json_type(data) = 'object' OR data IS NULL)
        ) WITHOUT ROWID;
        CREATE UNIQUE INDEX documents_version ON documents(user_id, version);
        CREATE INDEX documents_range ON documents(user_id, collection, range_value, id) WHERE deleted = 0;
        CREATE INDEX documents_tombstones ON documents(updated_at) WHERE deleted = 1;
        CREATE TABLE sync_state (
          user_id TEXT PRIMARY KEY NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          version INTEGER NOT NULL CHECK (version >= 0), -- the user's last change; 0 before the first
          purged_through INTEGER NOT NULL DEFAULT 0 CHECK (purged_through >= 0 AND purged_through <= version)
        ) WITHOUT ROWID;
        CREATE TABLE sync_clients (
          client_id TEXT PRIMARY KEY NOT NULL,
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          last_mutation_id INTEGER NOT NULL CHECK (last_mutation_id >= 0),
          updated_at INTEGER NOT NULL
        );
        CREATE INDEX sync_clients_user ON sync_clients(user_id);
        """

    /// Leases (``LeaseStore``): who computes a thing computed once (a daily AI generation) until when. A lease
    /// past its `expires_at` is free to take; rows are deleted when released.
    static let v6 = """
        CREATE TABLE leases (
          name TEXT PRIMARY KEY NOT NULL,
          holder TEXT NOT NULL,
          expires_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        """

    /// Each user's sync budget (`SyncBudget`): what their documents take, counted in `sync_state` by every
    /// document write and tombstone purge (documents, tombstones included, and the bytes of their data; counted
    /// here once for the rows already stored), and an index for the purge of idle sync clients.
    static let v7 = """
        ALTER TABLE sync_state ADD COLUMN stored_documents INTEGER NOT NULL DEFAULT 0 CHECK (stored_documents >= 0);
        ALTER TABLE sync_state ADD COLUMN stored_bytes INTEGER NOT NULL DEFAULT 0 CHECK (stored_bytes >= 0);
        UPDATE sync_state SET
          stored_documents = (SELECT count(*) FROM documents d WHERE d.user_id = sync_state.user_id),
          stored_bytes = (SELECT coalesce(sum(length(CAST(d.data AS BLOB))), 0) FROM documents d WHERE d.user_id = sync_state.user_id);
        CREATE INDEX sync_clients_idle ON sync_clients(updated_at);
        """

    /// Account recovery: when a user proved their email (`users.email_verified_at`, only with an email), and the
    /// single-use codes mailed for a password reset or an email verification (`account_codes`: one live code per user
    /// and purpose, a new one replaces it; only a keyed hash of the code; deleted with the account).
    static let v8 = """
        ALTER TABLE users ADD COLUMN email_verified_at INTEGER CHECK (email_verified_at IS NULL OR email IS NOT NULL);
        CREATE TABLE account_codes (
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          purpose TEXT NOT NULL CHECK (purpose IN ('password_reset', 'email_verification')),
          code_hash TEXT NOT NULL,
          expires_at INTEGER NOT NULL,
          failed_attempts INTEGER NOT NULL DEFAULT 0 CHECK (failed_attempts >= 0),
          created_at INTEGER NOT NULL,
          PRIMARY KEY (user_id, purpose)
        ) WITHOUT ROWID;
        """

    /// The columns of `ledger_entries` after `kind` since "v9" (rebuilt by "v9" and "v10"), and the rule every entry but a
    /// refund keeps: what is available does not fall below zero, unless the entry does not lower it.
    static let ledgerColumns = """
        amount INTEGER NOT NULL,
        held_change INTEGER NOT NULL,
        balance_after INTEGER NOT NULL,
        held_after INTEGER NOT NULL CHECK (held_after >= 0),
        reason TEXT,
        created_at INTEGER NOT NULL,
        reference TEXT,
        CHECK (held_after <= balance_after OR kind = 'refund' OR amount >= held_change),
        """

    /// The end of a rebuild of `ledger_entries` ("v9", "v10"; SQLite cannot change a CHECK in place): the rows are in
    /// `next_ledger_entries`; its id sequence continues the old table's (ids of deleted accounts' entries are never used
    /// again), it takes the old table's name, and the indexes of the purchase rules are made again.
    static let ledgerSwap = """
        INSERT INTO sqlite_sequence (name, seq) SELECT 'next_ledger_entries', 0
        WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'next_ledger_entries');
        UPDATE sqlite_sequence SET seq = max(seq, coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'ledger_entries'), 0))
        WHERE name = 'next_ledger_entries';
        DROP TABLE ledger_entries;
        ALTER TABLE next_ledger_entries RENAME TO ledger_entries;
        CREATE INDEX ledger_entries_user ON ledger_entries(user_id, id);
        CREATE UNIQUE INDEX ledger_entries_purchase_once ON ledger_entries(reference) WHERE kind = 'purchase';
        CREATE UNIQUE INDEX ledger_entries_refund_once ON ledger_entries(reference) WHERE kind = 'refund';
        CREATE UNIQUE INDEX ledger_entries_reversal_once ON ledger_entries(reference) WHERE kind = 'refund_reversed';
        """

    /// App Store purchases (`PurchaseStore`), and the ledger rules they need, for data already stored too:
    /// - What is available (`balance - held`) may go below zero through a refund only, or stay below it through an
    ///   entry that does not lower it (`WalletState.admits`: a purchase paying a debt off in part, a release, the
    ///   capture of a hold opened before the refund): the wallet keeps `held >= 0` alone, and each entry's
    ///   after-values carry the rule. New kinds `purchase`, `refund`, `refund_reversed`, `premium` (amount 0), each
    ///   with a `reference` (the transaction; a premium change's original transaction); one credit, at most one refund
    ///   and one reversal per transaction id are unique indexes. Entries keep their ids, and the id sequence its value.
    /// - `users.purchased_premium_until`: the latest end of the subscriptions the account holds (premium combines it
    ///   with `premium_until`, the admin's).
    /// - `purchases`: each transaction (a consumable's owner once credited stays `claimed` after the account's
    ///   deletion); `subscriptions`: each original transaction's holder and state, its premium's end a generated
    ///   column; `purchase_notifications`: the notifications seen, by `notificationUUID`.
    static let v9 = """
        CREATE TABLE next_wallets (
          user_id TEXT PRIMARY KEY NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          balance INTEGER NOT NULL,
          held INTEGER NOT NULL CHECK (held >= 0),
          version INTEGER NOT NULL CHECK (version >= 0)
        );
        INSERT INTO next_wallets (user_id, balance, held, version) SELECT user_id, balance, held, version FROM wallets;
        DROP TABLE wallets;
        ALTER TABLE next_wallets RENAME TO wallets;

        CREATE TABLE next_ledger_entries (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          kind TEXT NOT NULL CHECK (kind IN (
            'grant', 'debit', 'hold', 'capture', 'release', 'expire', 'purchase', 'refund', 'refund_reversed', 'premium')),
          \(ledgerColumns)
          CHECK ((reference IS NOT NULL) = (kind IN ('purchase', 'refund', 'refund_reversed', 'premium'))),
          CHECK (kind NOT IN ('purchase', 'refund', 'refund_reversed', 'premium') OR held_change = 0),
          CHECK (kind <> 'purchase' OR amount > 0),
          CHECK (kind <> 'refund' OR amount <= 0),
          CHECK (kind <> 'refund_reversed' OR amount >= 0),
          CHECK (kind <> 'premium' OR amount = 0)
        );
        INSERT INTO next_ledger_entries (id, user_id, kind, amount, held_change, balance_after, held_after, reason, created_at)
        SELECT id, user_id, kind, amount, held_change, balance_after, held_after, reason, created_at FROM ledger_entries;
        \(ledgerSwap)

        ALTER TABLE users ADD COLUMN purchased_premium_until INTEGER;

        CREATE TABLE purchases (
          transaction_id TEXT PRIMARY KEY NOT NULL,
          original_transaction_id TEXT NOT NULL,
          product_id TEXT NOT NULL,
          kind TEXT NOT NULL CHECK (kind IN ('consumable', 'subscription')),
          quantity INTEGER NOT NULL CHECK (quantity > 0),
          tokens INTEGER CHECK (tokens > 0),
          environment TEXT NOT NULL,
          user_id TEXT REFERENCES users(id) ON DELETE SET NULL,
          claimed INTEGER NOT NULL CHECK (claimed IN (0, 1)),
          purchased_at INTEGER NOT NULL,
          expires_at INTEGER,
          revoked_at INTEGER,
          refunded_tokens INTEGER CHECK (refunded_tokens >= 0 AND refunded_tokens <= tokens),
          reversed_at INTEGER,
          signed_at INTEGER,
          recorded_at INTEGER NOT NULL,
          CHECK ((kind = 'consumable') = (tokens IS NOT NULL)),
          CHECK ((kind = 'subscription') = (expires_at IS NOT NULL)),
          CHECK (kind = 'consumable' OR (claimed = 0 AND refunded_tokens IS NULL AND reversed_at IS NULL)),
          CHECK (kind = 'subscription' OR claimed = 1 OR user_id IS NULL OR revoked_at IS NOT NULL),
          CHECK (kind = 'subscription' OR revoked_at IS NULL OR refunded_tokens IS NOT NULL),
          CHECK (reversed_at IS NULL OR (refunded_tokens IS NOT NULL AND revoked_at IS NULL))
        );
        CREATE INDEX purchases_user ON purchases(user_id, purchased_at, transaction_id);
        CREATE INDEX purchases_unclaimed ON purchases(purchased_at, transaction_id) WHERE user_id IS NULL AND claimed = 0;
        CREATE INDEX purchases_original ON purchases(original_transaction_id);
        CREATE TABLE subscriptions (
          original_transaction_id TEXT PRIMARY KEY NOT NULL,
          product_id TEXT NOT NULL,
          environment TEXT NOT NULL,
          user_id TEXT REFERENCES users(id) ON DELETE SET NULL,
          expires_at INTEGER NOT NULL,
          grace_until INTEGER,
          revoked_at INTEGER,
          signed_at INTEGER NOT NULL,
          premium_until INTEGER NOT NULL GENERATED ALWAYS AS (
            min(max(expires_at, coalesce(grace_until, expires_at)), coalesce(revoked_at, max(expires_at, coalesce(grace_until, expires_at))))
          ) STORED
        );
        CREATE INDEX subscriptions_user ON subscriptions(user_id);
        CREATE TABLE purchase_notifications (
          uuid TEXT PRIMARY KEY NOT NULL,
          type TEXT NOT NULL,
          transaction_id TEXT,
          signed_at INTEGER NOT NULL,
          received_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        """

    /// Apple identities (`AppleIdentityStore`) and merging a guest into an account (`MergeStore`):
    /// - `users.apple_sub`: Apple's stable user id, unique, the identity (never the email); `apple_email` only a contact,
    ///   `apple_refresh_token` opaque text to revoke at deletion, both only with an identity. An account with one has no
    ///   installation (linking detaches a guest, as linking an email does).
    /// - `users.merged_into`: the account a guest was merged into; a merged guest has no way in left (no installation,
    ///   email or Apple identity) and goes with that account. `merges` keeps each merge's summary, once per guest.
    /// - Ledger kinds `merge_out` (on the guest, reference: the account) and `merge_in` (on the account, reference: the
    ///   guest), no held change, each once per guest (unique indexes); a negative `merge_in` (a guest's debt) must leave
    ///   the account with something available, as every entry but a refund must.
    static let v10 = """
        ALTER TABLE users ADD COLUMN apple_sub TEXT CONSTRAINT users_apple_installation CHECK (apple_sub IS NULL OR installation IS NULL);
        ALTER TABLE users ADD COLUMN apple_email TEXT CONSTRAINT users_apple_email CHECK (apple_email IS NULL OR apple_sub IS NOT NULL);
        ALTER TABLE users ADD COLUMN apple_refresh_token TEXT
          CONSTRAINT users_apple_refresh_token CHECK (apple_refresh_token IS NULL OR apple_sub IS NOT NULL);
        ALTER TABLE users ADD COLUMN apple_linked_at INTEGER CONSTRAINT users_apple_linked_at CHECK ((apple_linked_at IS NULL) = (apple_sub IS NULL));
        CREATE UNIQUE INDEX users_apple_sub ON users(apple_sub);
        ALTER TABLE users ADD COLUMN merged_into TEXT REFERENCES users(id) ON DELETE CASCADE
          CONSTRAINT users_merged CHECK (merged_into IS NULL OR (merged_into <> id AND email IS NULL AND apple_sub IS NULL AND installation IS NULL));
        CREATE INDEX users_merged_into ON users(merged_into) WHERE merged_into IS NOT NULL;
        CREATE TABLE merges (
          guest_id TEXT PRIMARY KEY NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          account_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          summary TEXT NOT NULL CHECK (json_type(summary) = 'object'),
          merged_at INTEGER NOT NULL,
          CHECK (guest_id <> account_id)
        ) WITHOUT ROWID;
        CREATE INDEX merges_account ON merges(account_id);

        CREATE TABLE next_ledger_entries (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          kind TEXT NOT NULL CHECK (kind IN (
            'grant', 'debit', 'hold', 'capture', 'release', 'expire', 'purchase', 'refund', 'refund_reversed', 'premium',
            'merge_out', 'merge_in')),
          \(ledgerColumns)
          CHECK ((reference IS NOT NULL) = (kind IN ('purchase', 'refund', 'refund_reversed', 'premium', 'merge_out', 'merge_in'))),
          CHECK (kind NOT IN ('purchase', 'refund', 'refund_reversed', 'premium', 'merge_out', 'merge_in') OR held_change = 0),
          CHECK (kind <> 'purchase' OR amount > 0),
          CHECK (kind <> 'refund' OR amount <= 0),
          CHECK (kind <> 'refund_reversed' OR amount >= 0),
          CHECK (kind <> 'premium' OR amount = 0),
          CHECK (kind NOT IN ('merge_out', 'merge_in') OR reference <> user_id)
        );
        INSERT INTO next_ledger_entries (id, user_id, kind, amount, held_change, balance_after, held_after, reason, created_at, reference)
        SELECT id, user_id, kind, amount, held_change, balance_after, held_after, reason, created_at, reference FROM ledger_entries;
        \(ledgerSwap)
        CREATE UNIQUE INDEX ledger_entries_merge_out_once ON ledger_entries(user_id) WHERE kind = 'merge_out';
        CREATE UNIQUE INDEX ledger_entries_merge_in_once ON ledger_entries(reference) WHERE kind = 'merge_in';
        """

    /// The operator's console (`ConsoleStore`):
    /// - `console_audit`: every admin action, append-only — triggers refuse an update or a delete of a row, so the log
    ///   can only grow (a user's deletion keeps its rows: `user_id` is plain text, not a reference).
    /// - `users_created` and `ledger_entries_created`: the overview's "today" and "7 days" are ranges on these, and the
    ///   newest-users list walks the first; `sessions_user_created` lists an account's sessions newest first.
    static let v11 = """
        CREATE TABLE console_audit (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          at INTEGER NOT NULL,
          operator_session TEXT NOT NULL CHECK (length(operator_session) BETWEEN 1 AND 100),
          action TEXT NOT NULL CHECK (action IN ('grant', 'premium', 'revoke_sessions', 'delete_user')),
          user_id TEXT,
          before TEXT,
          after TEXT
        );
        CREATE TRIGGER console_audit_no_update BEFORE UPDATE ON console_audit
        BEGIN SELECT RAISE(ABORT, 'console_audit is append-only'); END;
        CREATE TRIGGER console_audit_no_delete BEFORE DELETE ON console_audit
        BEGIN SELECT RAISE(ABORT, 'console_audit is append-only'); END;
        CREATE INDEX users_created ON users(created_at, id);
        CREATE INDEX ledger_entries_created ON ledger_entries(created_at);
        CREATE INDEX sessions_user_created ON sessions(user_id, created_at);
        """

    /// Sign in with Apple taken once and in order (`AppleIdentityStore`):
    /// - `users.apple_consent_revoked_at`: Apple's `consent-revoked` leaves the identity linked and marks when (only
    ///   with an identity); the next sign-in with it clears the mark and moves `apple_linked_at` to its time.
    /// - `apple_notifications`: the account notifications taken, by `jti` (inserted first in the transaction that acts
    ///   on one), kept until `keep_until` (past it the verifier refuses them as too old).
    /// - `apple_token_uses`: each identity token signed in with, by `sub` and digest, kept until its `exp`;
    ///   `merging_guest` (plain text: the guest's deletion must not free the token) is the guest whose merge it was for,
    ///   the only caller that may use it again.
    static let v12 = """
        ALTER TABLE users ADD COLUMN apple_consent_revoked_at INTEGER
          CONSTRAINT users_apple_consent_revoked CHECK (apple_consent_revoked_at IS NULL OR apple_sub IS NOT NULL);
        CREATE TABLE apple_notifications (
          jti TEXT PRIMARY KEY NOT NULL,
          keep_until INTEGER NOT NULL,
          received_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX apple_notifications_keep_until ON apple_notifications(keep_until);
        CREATE TABLE apple_token_uses (
          subject TEXT NOT NULL,
          digest TEXT NOT NULL CHECK (length(digest) = 64),
          expires_at INTEGER NOT NULL,
          merging_guest TEXT,
          used_at INTEGER NOT NULL,
          PRIMARY KEY (subject, digest)
        ) WITHOUT ROWID;
        CREATE INDEX apple_token_uses_expires ON apple_token_uses(expires_at);
        """

    /// Purchase statuses that tell the truth, Sandbox bounds and refunds after reversals:
    /// - `subscriptions.transaction_id`: the transaction of the newest fact applied (its latest renewal); `revocation`:
    ///   why `revoked_at` is set (`refund` or `revoke`; from the newest REFUND or REVOKE notification recorded).
    /// - `purchases` holds a subscription once per account that listed it (its renewals' rows become one, keyed by the
    ///   original transaction, bought at its first period); its state is the subscription's alone (no `expires_at`, nor
    ///   `revoked_at`/`signed_at` of its own). The row of the account holding it is made if missing; rows of no account
    ///   go once someone holds it. The primary key becomes two unique indexes: a consumable's transaction, a
    ///   subscription's (original transaction, account).
    /// - `purchases.refunds`: how many refunds a consumable had (each after the reversal of the one before; the n-th's
    ///   entries reference `<transaction>#n` from the second, so the ledger's unique indexes hold each to once).
    static let v13 = """
        CREATE TABLE next_subscriptions (
          original_transaction_id TEXT PRIMARY KEY NOT NULL,
          transaction_id TEXT NOT NULL,
          product_id TEXT NOT NULL,
          environment TEXT NOT NULL,
          user_id TEXT REFERENCES users(id) ON DELETE SET NULL,
          expires_at INTEGER NOT NULL,
          grace_until INTEGER,
          revoked_at INTEGER,
          revocation TEXT CHECK (revocation IN ('refund', 'revoke')),
          signed_at INTEGER NOT NULL,
          premium_until INTEGER NOT NULL GENERATED ALWAYS AS (
            min(max(expires_at, coalesce(grace_until, expires_at)), coalesce(revoked_at, max(expires_at, coalesce(grace_until, expires_at))))
          ) STORED,
          CHECK ((revoked_at IS NULL) = (revocation IS NULL))
        );
        INSERT INTO next_subscriptions (original_transaction_id, transaction_id, product_id, environment, user_id, expires_at,
          grace_until, revoked_at, revocation, signed_at)
        SELECT s.original_transaction_id,
          coalesce((SELECT p.transaction_id FROM purchases p WHERE p.original_transaction_id = s.original_transaction_id
                    ORDER BY p.expires_at DESC, p.purchased_at DESC, p.transaction_id DESC LIMIT 1), s.original_transaction_id),
          s.product_id, s.environment, s.user_id, s.expires_at, s.grace_until, s.revoked_at,
          CASE WHEN s.revoked_at IS NULL THEN NULL
               WHEN (SELECT n.type FROM purchase_notifications n JOIN purchases p ON p.transaction_id = n.transaction_id
                     WHERE p.original_transaction_id = s.original_transaction_id AND n.type IN ('REFUND', 'REVOKE')
                     ORDER BY n.signed_at DESC LIMIT 1) = 'REVOKE' THEN 'revoke'
               ELSE 'refund' END,
          s.signed_at
        FROM subscriptions s;

        CREATE TABLE next_purchases (
          transaction_id TEXT NOT NULL,
          original_transaction_id TEXT NOT NULL,
          product_id TEXT NOT NULL,
          kind TEXT NOT NULL CHECK (kind IN ('consumable', 'subscription')),
          quantity INTEGER NOT NULL CHECK (quantity > 0),
          tokens INTEGER CHECK (tokens > 0),
          environment TEXT NOT NULL,
          user_id TEXT REFERENCES users(id) ON DELETE SET NULL,
          claimed INTEGER NOT NULL CHECK (claimed IN (0, 1)),
          purchased_at INTEGER NOT NULL,
          revoked_at INTEGER,
          refunded_tokens INTEGER CHECK (refunded_tokens >= 0 AND refunded_tokens <= tokens),
          refunds INTEGER NOT NULL CHECK (refunds >= 0),
          reversed_at INTEGER,
          signed_at INTEGER,
          recorded_at INTEGER NOT NULL,
          CHECK ((kind = 'consumable') = (tokens IS NOT NULL)),
          CHECK (kind = 'consumable' OR (transaction_id = original_transaction_id AND claimed = 0 AND revoked_at IS NULL
            AND refunds = 0 AND reversed_at IS NULL AND signed_at IS NULL)),
          CHECK (kind = 'subscription' OR claimed = 1 OR user_id IS NULL OR revoked_at IS NOT NULL),
          CHECK (kind = 'subscription' OR revoked_at IS NULL OR refunded_tokens IS NOT NULL),
          CHECK (reversed_at IS NULL OR (refunded_tokens IS NOT NULL AND revoked_at IS NULL)),
          CHECK ((refunds = 0) = (refunded_tokens IS NULL))
        );
        INSERT INTO next_purchases (transaction_id, original_transaction_id, product_id, kind, quantity, tokens, environment, user_id,
          claimed, purchased_at, revoked_at, refunded_tokens, refunds, reversed_at, signed_at, recorded_at)
        SELECT transaction_id, original_transaction_id, product_id, kind, quantity, tokens, environment, user_id, claimed, purchased_at,
          revoked_at, refunded_tokens, CASE WHEN refunded_tokens IS NULL THEN 0 ELSE 1 END, reversed_at, signed_at, recorded_at
        FROM purchases WHERE kind = 'consumable';
        INSERT INTO next_purchases (transaction_id, original_transaction_id, product_id, kind, quantity, tokens, environment, user_id,
          claimed, purchased_at, refunds, recorded_at)
        SELECT p.original_transaction_id, p.original_transaction_id, min(p.product_id), 'subscription', 1, NULL, min(p.environment),
          p.user_id, 0, min(p.purchased_at), 0, min(p.recorded_at)
        FROM purchases p LEFT JOIN subscriptions s ON s.original_transaction_id = p.original_transaction_id
        WHERE p.kind = 'subscription' AND (p.user_id IS NOT NULL OR s.user_id IS NULL)
        GROUP BY p.original_transaction_id, p.user_id;
        INSERT INTO next_purchases (transaction_id, original_transaction_id, product_id, kind, quantity, environment, user_id,
          claimed, purchased_at, refunds, recorded_at)
        SELECT s.original_transaction_id, s.original_transaction_id, s.product_id, 'subscription', 1, s.environment, s.user_id, 0,
          coalesce((SELECT min(p.purchased_at) FROM purchases p WHERE p.original_transaction_id = s.original_transaction_id), s.expires_at),
          0, coalesce((SELECT min(p.recorded_at) FROM purchases p WHERE p.original_transaction_id = s.original_transaction_id), s.signed_at)
        FROM subscriptions s
        WHERE s.user_id IS NOT NULL AND NOT EXISTS (
          SELECT 1 FROM purchases p WHERE p.original_transaction_id = s.original_transaction_id AND p.user_id = s.user_id);

        DROP TABLE purchases;
        ALTER TABLE next_purchases RENAME TO purchases;
        DROP TABLE subscriptions;
        ALTER TABLE next_subscriptions RENAME TO subscriptions;
        CREATE UNIQUE INDEX purchases_consumable ON purchases(transaction_id) WHERE kind = 'consumable';
        CREATE UNIQUE INDEX purchases_subscription ON purchases(original_transaction_id, user_id) WHERE kind = 'subscription';
        CREATE INDEX purchases_user ON purchases(user_id, purchased_at, transaction_id);
        CREATE INDEX purchases_unclaimed ON purchases(purchased_at, transaction_id) WHERE user_id IS NULL AND claimed = 0;
        CREATE INDEX subscriptions_user ON subscriptions(user_id);
        CREATE INDEX subscriptions_transaction ON subscriptions(transaction_id);
        """

    /// The ledger's rules of "v10", each `kind IN (…)` of three or more values written as comparisons joined by OR (and
    /// `NOT IN` by AND). SQLite 3.40 compiles a CHECK's IN list of three or more constants into an ephemeral table
    /// built on every insert: three such lists made one ledger insert cost 51 µs instead of 16 µs (50,000 inserts in
    /// memory), about a third of a `POST /v1/actions/{name}`'s CPU on SQLite (`SQLiteHotStatementsTests` keeps every
    /// hot statement free of ephemeral tables). Same rules, same indexes; ids and the id sequence kept.
    static let v14 = """
        CREATE TABLE next_ledger_entries (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          kind TEXT NOT NULL CHECK (
            kind = 'grant' OR kind = 'debit' OR kind = 'hold' OR kind = 'capture' OR kind = 'release' OR kind = 'expire'
            OR kind = 'purchase' OR kind = 'refund' OR kind = 'refund_reversed' OR kind = 'premium' OR kind = 'merge_out'
            OR kind = 'merge_in'),
          \(ledgerColumns)
          CHECK ((reference IS NOT NULL) = (\(referenceKinds))),
          CHECK (NOT (\(referenceKinds)) OR held_change = 0),
          CHECK (kind <> 'purchase' OR amount > 0),
          CHECK (kind <> 'refund' OR amount <= 0),
          CHECK (kind <> 'refund_reversed' OR amount >= 0),
          CHECK (kind <> 'premium' OR amount = 0),
          CHECK ((kind <> 'merge_out' AND kind <> 'merge_in') OR reference <> user_id)
        );
        INSERT INTO next_ledger_entries (id, user_id, kind, amount, held_change, balance_after, held_after, reason, created_at, reference)
        SELECT id, user_id, kind, amount, held_change, balance_after, held_after, reason, created_at, reference FROM ledger_entries;
        \(ledgerSwap)
        CREATE UNIQUE INDEX ledger_entries_merge_out_once ON ledger_entries(user_id) WHERE kind = 'merge_out';
        CREATE UNIQUE INDEX ledger_entries_merge_in_once ON ledger_entries(reference) WHERE kind = 'merge_in';
        CREATE INDEX ledger_entries_created ON ledger_entries(created_at);
        """

    /// The kinds whose entries name a transaction or the other account of a merge (`reference`), as one OR.
    private static let referenceKinds = """
        kind = 'purchase' OR kind = 'refund' OR kind = 'refund_reversed' OR kind = 'premium' OR kind = 'merge_out' OR kind = 'merge_in'
        """

    /// Holds of 0 tokens: a premium user's AI call on a model whose `premium` is `free` or a quota holds nothing
    /// (``PremiumHold``) and is captured at 0, so the call is on the ledger with what the provider counted. `amount`
    /// may be 0; `status` is written as ORs, not an IN list (see "v14"); everything else is as before (rows and indexes kept).
    static let v15 = """
        CREATE TABLE next_holds (
          id TEXT PRIMARY KEY NOT NULL,
          user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
          amount INTEGER NOT NULL CHECK (amount >= 0),
          status TEXT NOT NULL CHECK (status = 'open' OR status = 'captured' OR status = 'released' OR status = 'expired'),
          captured_amount INTEGER CHECK (captured_amount >= 0 AND captured_amount <= amount),
          created_at INTEGER NOT NULL,
          expires_at INTEGER NOT NULL,
          settled_at INTEGER,
          CHECK ((status = 'captured') = (captured_amount IS NOT NULL)),
          CHECK ((status = 'open') = (settled_at IS NULL))
        );
        INSERT INTO next_holds (id, user_id, amount, status, captured_amount, created_at, expires_at, settled_at)
        SELECT id, user_id, amount, status, captured_amount, created_at, expires_at, settled_at FROM holds;
        DROP TABLE holds;
        ALTER TABLE next_holds RENAME TO holds;
        CREATE INDEX holds_open ON holds(expires_at) WHERE status = 'open';
        CREATE INDEX holds_user ON holds(user_id, status);
        """
}
