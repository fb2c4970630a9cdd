/// A table the stores write. A write declares the tables it changes (``StoreWrite``); a cache names the tables its
/// entries read (``CacheReads``); what a committed transaction makes a cache forget is derived from the two, never
/// called by hand at a write site.
public enum StoreTable: String, CaseIterable, Hashable, Sendable {
    case accountCodes = "account_codes"
    case appAttestKeys = "app_attest_keys"
    case appleNotifications = "apple_notifications"
    case appleTokenUses = "apple_token_uses"
    case attestationChallenges = "attestation_challenges"
    case consoleAudit = "console_audit"
    case consumptionConsents = "consumption_consents"
    case consumptionRequests = "consumption_requests"
    case deviceCredentials = "device_credentials"
    case documents
    case guestSignups = "guest_signups"
    case holds
    case idempotencyKeys = "idempotency_keys"
    case installationQuotaCounters = "installation_quota_counters"
    case installations
    case leases
    case ledgerEntries = "ledger_entries"
    case merges
    case purchaseNotifications = "purchase_notifications"
    case purchases
    case quotaCounters = "quota_counters"
    case refreshTokens = "refresh_tokens"
    case serverInstances = "server_instances"
    case serverSecrets = "server_secrets"
    case sessionRevocations = "session_revocations"
    case sessions
    case signInFailures = "sign_in_failures"
    case subscriptions
    case syncClients = "sync_clients"
    case syncState = "sync_state"
    case unattestedSpends = "unattested_spends"
    case users
    case wallets
}

/// Which rows of a table a write changed, in the keys the caches are indexed by.
public enum ChangedRows: Hashable, Sendable {
    /// Rows of one account (its user id).
    case user(String)
    /// One session's rows (its id).
    case session(String)
    /// One purchase's rows (its transaction id).
    case transaction(String)
    /// Rows not known by a cache's key (a cutoff, a sweep): every cache that reads the table forgets everything.
    case all
}

/// One write statement declared with the tables it changes: the single place that says what the statement touches.
/// The stores run writes only through their declarations, so the caches' invalidation follows from them; a test
/// reads every `INSERT`/`UPDATE`/`DELETE` in both stores' sources and fails for one outside a declaration, or
/// for a declaration whose tables differ from those its SQL writes.
public struct StoreWrite: Sendable {
    /// The statement (for PostgreSQL, the text the statement is built around).
    public let sql: String
    /// The tables the statement changes, including through `RETURNING` sub-statements and `ON CONFLICT … DO UPDATE`.
    public let changes: Set<StoreTable>

    /// Declares `sql` as changing `changes`.
    public init(_ changes: StoreTable..., sql: String) {
        (self.sql, self.changes) = (sql, Set(changes))
    }
}

/// What a cache's entries read, so that it forgets them when a committed write changes one of those tables.
public struct CacheReads: Sendable {
    /// The tables.
    public let tables: Set<StoreTable>

    /// A cache reading `tables`.
    public init(_ tables: StoreTable...) { self.tables = Set(tables) }
}

/// The changes of one open transaction: noted as its declared writes run, handed to the caches when it commits,
/// dropped when it rolls back. Not thread-safe by itself: a store keeps one per writer (SQLite) or per transaction.
public struct PendingChanges: Sendable {
    /// The rows changed, per table.
    public private(set) var rows: [StoreTable: Set<ChangedRows>] = [:]

    /// Nothing changed yet.
    public init() {}

    /// Notes that `write` changed `rows`.
    public mutating func note(_ write: StoreWrite, _ changed: ChangedRows) {
        for table in write.changes { note(table, changed) }
    }

    /// Notes that `table` changed in `changed`.
    public mutating func note(_ table: StoreTable, _ changed: ChangedRows) {
        if changed == .all { return rows[table] = [.all] }
        if rows[table]?.contains(.all) == true { return }
        rows[table, default: []].insert(changed)
    }

    /// Whether nothing was noted.
    public var isEmpty: Bool { rows.isEmpty }

    /// The rows changed of the tables `reads` names: what a cache reading them must forget. `[.all]` when any of
    /// them changed in rows not known by key.
    public func changed(for reads: CacheReads) -> Set<ChangedRows> {
        var changed = Set<ChangedRows>()
        for table in reads.tables {
            guard let rows = rows[table] else { continue }
            if rows.contains(.all) { return [.all] }
            changed.formUnion(rows)
        }
        return changed
    }
}
