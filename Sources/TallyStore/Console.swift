import Foundation

/// One row of the operator's audit log: an admin action as it was taken. Append-only (the schema refuses an update or a
/// delete of a row).
public struct AuditEntry: Sendable, Hashable {
    /// Increasing with time; the audit page's cursor.
    public var id: Int64
    /// When the action was taken.
    public var at: Date
    /// Which operator: a console session's public label (never its cookie), or `admin-api` for the admin key's API.
    public var operatorSession: String
    /// What was done: `grant`, `premium`, `revoke_sessions`, `delete_user`.
    public var action: String
    /// The account acted on.
    public var userId: String?
    /// The state before, as short text (`balance=10`, `premium_until=-`), when there was one.
    public var before: String?
    /// The state after.
    public var after: String?

    /// An audit row as stored.
    public init(
        id: Int64, at: Date, operatorSession: String, action: String, userId: String?, before: String?, after: String?
    ) {
        (self.id, self.at, self.operatorSession, self.action, self.userId, self.before, self.after) =
            (id, at, operatorSession, action, userId, before, after)
    }
}

/// An audit row to append (its id is the store's).
public struct NewAuditEntry: Sendable, Hashable {
    /// When the action was taken.
    public var at: Date
    /// See ``AuditEntry/operatorSession``.
    public var operatorSession: String
    /// See ``AuditEntry/action``.
    public var action: String
    /// See ``AuditEntry/userId``.
    public var userId: String?
    /// See ``AuditEntry/before``.
    public var before: String?
    /// See ``AuditEntry/after``.
    public var after: String?

    /// An audit row to append.
    public init(at: Date, operatorSession: String, action: String, userId: String?, before: String?, after: String?) {
        (self.at, self.operatorSession, self.action, self.userId, self.before, self.after) =
            (at, operatorSession, action, userId, before, after)
    }
}

/// Where the newest-users list goes on from: the last user of the previous page.
public struct UserCursor: Sendable, Hashable {
    /// The last user's creation time.
    public var createdAt: Date
    /// The last user's id (ties in creation time).
    public var id: String

    /// A cursor after the user created at `createdAt` with `id`.
    public init(createdAt: Date, id: String) {
        (self.createdAt, self.id) = (createdAt, id)
    }

    /// The cursor a ``token`` stands for; `nil` for anything else (an id that is not a UUID, an instant beyond
    /// ``Date/writableMillis``).
    public init?(token: String) {
        guard let (createdAt, id) = InstantCursor.parts(of: token), UUID(uuidString: id) != nil else { return nil }
        (self.createdAt, self.id) = (createdAt, id)
    }

    /// An opaque text form for the console's `after` parameter: `<creation millis>.<user id>`.
    public var token: String { "\(createdAt.millis).\(id)" }
}

/// The text form of a cursor that is an instant and an id: `<millis>.<id>`.
enum InstantCursor {
    /// The instant and the id of `token`: `nil` unless it is a whole number of milliseconds as the server writes one
    /// (no sign but `-`, no leading zero) within ``Date/writableMillis``, a dot and a non-empty id.
    static func parts(of token: String) -> (Date, String)? {
        guard let dot = token.firstIndex(of: "."), let millis = Int64(token[..<dot]), String(millis) == token[..<dot],
            Date.writableMillis.contains(millis)
        else { return nil }
        let id = String(token[token.index(after: dot)...])
        return id.isEmpty ? nil : (Date(millis: millis), id)
    }
}

/// One session of an account, as the console lists it.
public struct SessionSummary: Sendable, Hashable {
    /// The session id (not a secret: tokens are signed, the id only names the session).
    public var id: String
    /// When it was opened.
    public var createdAt: Date
    /// When it was revoked, if it was.
    public var revokedAt: Date?

    /// A session as listed.
    public init(id: String, createdAt: Date, revokedAt: Date?) {
        (self.id, self.createdAt, self.revokedAt) = (id, createdAt, revokedAt)
    }
}

/// One synced collection of an account: its live documents, their bytes (canonical JSON) and the last change.
public struct CollectionStats: Sendable, Hashable {
    /// The collection's name.
    public var collection: String
    /// Live documents (tombstones not counted).
    public var documents: Int
    /// Bytes of the live documents' canonical JSON.
    public var bytes: Int64
    /// The newest change of a document of the collection (a deletion included).
    public var lastChange: Date

    /// A collection's numbers.
    public init(collection: String, documents: Int, bytes: Int64, lastChange: Date) {
        (self.collection, self.documents, self.bytes, self.lastChange) = (collection, documents, bytes, lastChange)
    }
}

/// Tokens moved by one kind of ledger entry over a period.
public struct KindTotal: Sendable, Hashable {
    /// The entries' kind.
    public var kind: EntryKind
    /// How many entries.
    public var entries: Int
    /// The sum of their amounts (negative for spending).
    public var amount: Int64

    /// A kind's total.
    public init(kind: EntryKind, entries: Int, amount: Int64) {
        (self.kind, self.entries, self.amount) = (kind, entries, amount)
    }
}

/// The console's overview numbers over one period (`since` to now).
public struct PeriodTotals: Sendable, Hashable {
    /// Where the period begins.
    public var since: Date
    /// Accounts (guests included) created in the period.
    public var newUsers: Int
    /// Ledger entries of the period by kind.
    public var kinds: [KindTotal]
    /// The spending (debit and capture) entries of the period by ``SpendingGroup`` (an action's name, an AI model,
    /// the wallet API's holds), most tokens first, at most ten.
    public var topReasons: [ReasonTotal]

    /// A period's totals.
    public init(since: Date, newUsers: Int, kinds: [KindTotal], topReasons: [ReasonTotal]) {
        (self.since, self.newUsers, self.kinds, self.topReasons) = (since, newUsers, kinds, topReasons)
    }

    /// The total of `kind` (zero when there was none).
    public func total(_ kind: EntryKind) -> KindTotal {
        kinds.first { $0.kind == kind } ?? KindTotal(kind: kind, entries: 0, amount: 0)
    }

    /// The sum of `parts` (periods such as ``ConsoleStore/hourlyTotals(from:to:)``'s hours) as one period beginning at
    /// `since`: kinds by name, the `reasons` top reasons by tokens (then by name).
    public static func sum(_ parts: some Sequence<PeriodTotals>, since: Date, reasons: Int = 10) -> PeriodTotals {
        var newUsers = 0
        var kinds: [EntryKind: KindTotal] = [:]
        var spent: [String: ReasonTotal] = [:]
        for part in parts {
            newUsers += part.newUsers
            for total in part.kinds {
                kinds[total.kind, default: KindTotal(kind: total.kind, entries: 0, amount: 0)].add(total)
            }
            for total in part.topReasons {
                spent[total.reason, default: ReasonTotal(reason: total.reason, entries: 0, tokens: 0)].add(total)
            }
        }
        return PeriodTotals(
            since: since, newUsers: newUsers, kinds: kinds.values.sorted { $0.kind.rawValue < $1.kind.rawValue },
            topReasons: Array(spent.values.sorted(by: ReasonTotal.mostTokensFirst).prefix(reasons)))
    }
}

/// Builds ``ConsoleStore/hourlyTotals(from:to:)``'s answer from the rows both stores read: ledger entries grouped by
/// hour, kind and ``SpendingGroup`` (`nil` for a kind that is not spending), and new users grouped by hour.
public struct HourlyTotalsBuilder {
    /// Milliseconds in an hour: a row's hour is `created_at / 3_600_000`, in UTC.
    public static let hourMillis: Int64 = 3_600_000
    private var hours: [Int64: PeriodTotals] = [:]

    /// An empty set of hours.
    public init() {}

    /// Adds `entries` ledger entries of `kind` (unknown kinds are skipped) moving `amount`, under `reason` when spent.
    public mutating func add(hour: Int64, kind: String, reason: String?, entries: Int, amount: Int64) {
        guard let kind = EntryKind(rawValue: kind) else { return }
        update(hour) { totals in
            if let index = totals.kinds.firstIndex(where: { $0.kind == kind }) {
                totals.kinds[index].add(KindTotal(kind: kind, entries: entries, amount: amount))
            } else {
                totals.kinds.append(KindTotal(kind: kind, entries: entries, amount: amount))
            }
            if let reason {
                if let index = totals.topReasons.firstIndex(where: { $0.reason == reason }) {
                    totals.topReasons[index].add(ReasonTotal(reason: reason, entries: entries, tokens: -amount))
                } else {
                    totals.topReasons.append(ReasonTotal(reason: reason, entries: entries, tokens: -amount))
                }
            }
        }
    }

    /// Adds `count` users created in `hour`.
    public mutating func addUsers(hour: Int64, count: Int) {
        update(hour) { $0.newUsers += count }
    }

    /// The hours, oldest first, kinds by name and reasons most tokens first.
    public func build() -> [PeriodTotals] {
        hours.keys.sorted().map { hour in
            var totals = hours[hour]!
            totals.kinds.sort { $0.kind.rawValue < $1.kind.rawValue }
            totals.topReasons.sort(by: ReasonTotal.mostTokensFirst)
            return totals
        }
    }

    private mutating func update(_ hour: Int64, _ change: (inout PeriodTotals) -> Void) {
        change(&hours[hour, default: PeriodTotals(since: Date(millis: hour * Self.hourMillis), newUsers: 0, kinds: [], topReasons: [])])
    }
}

extension KindTotal {
    mutating func add(_ other: KindTotal) {
        entries += other.entries
        amount += other.amount
    }
}

extension ReasonTotal {
    /// Most tokens first, then by reason.
    public static func mostTokensFirst(_ a: ReasonTotal, _ b: ReasonTotal) -> Bool {
        a.tokens != b.tokens ? a.tokens > b.tokens : a.reason < b.reason
    }

    mutating func add(_ other: ReasonTotal) {
        entries += other.entries
        tokens += other.tokens
    }
}

/// What the overview groups spending by: an action's name; for the AI gateway's calls, their model (one group per model,
/// not one per call, whose entries' reasons begin with the call's hold id: `<hold id> ai <model> prompt=…`); for holds
/// taken and captured through the wallet API (reason: the hold id alone), one group. Action names have no spaces
/// (`Limits.isValidName`), so no action is mistaken for either.
public enum SpendingGroup {
    /// The group of every capture of a hold taken through the wallet API.
    public static let walletHolds = "holds (wallet API)"
    /// The prefix of an AI model's group: `AI chat` for the model `chat`.
    public static let aiPrefix = "AI "

    /// The group of a ledger entry of `kind` under `reason`: `nil` unless it is spending (a debit or a capture).
    public static func of(kind: EntryKind, reason: String?) -> String? {
        guard kind == .debit || kind == .capture else { return nil }
        // An AI call's reason: a 36-character hold id, " ai ", the model, then a space or the end (in code points, as SQL counts).
        if let scalars = reason?.unicodeScalars, scalars.count > 40, scalars.dropFirst(36).starts(with: " ai ".unicodeScalars) {
            return aiPrefix + String(String.UnicodeScalarView(scalars.dropFirst(40).prefix { $0 != " " }))
        }
        return kind == .capture ? walletHolds : reason ?? "-"
    }

    /// ``of(kind:reason:)`` as an SQL expression over a `ledger_entries` row (`kind`, `reason`), for a dialect whose
    /// function finding a text in another is `find` (SQLite `instr`, PostgreSQL `strpos`): the stores group by it, so
    /// a week of AI calls is one row per model and hour, not one per call. Character positions, as `of` counts.
    public static func sql(find: String) -> String {
        """
        CASE WHEN kind NOT IN ('debit', 'capture') THEN NULL
          WHEN length(reason) > 40 AND substr(reason, 37, 4) = ' ai '
            THEN '\(aiPrefix)' || substr(reason, 41, \(find)(substr(reason, 41) || ' ', ' ') - 1)
          WHEN kind = 'capture' THEN '\(walletHolds)'
          ELSE coalesce(reason, '-') END
        """
    }
}

/// Spending under one group (``SpendingGroup``).
public struct ReasonTotal: Sendable, Hashable {
    /// The entries' group: an action's name, `AI <model>`, `holds (wallet API)`; `-` when none.
    public var reason: String
    /// How many entries.
    public var entries: Int
    /// Tokens spent (positive).
    public var tokens: Int64

    /// A reason's total.
    public init(reason: String, entries: Int, tokens: Int64) {
        (self.reason, self.entries, self.tokens) = (reason, entries, tokens)
    }
}

/// Users by kind: the whole table, which the server counts at most once a minute (``ConsoleStore/userCounts()``).
public struct UserCounts: Sendable, Hashable {
    /// Users without an email or Apple identity (merged guests included).
    public var guests: Int
    /// Users with an email or an Apple identity.
    public var accounts: Int

    /// Counts of users.
    public init(guests: Int, accounts: Int) {
        (self.guests, self.accounts) = (guests, accounts)
    }
}

/// What the operator's console reads and writes beyond the rest of the storage protocol: lookups, index-driven pages,
/// the overview's ranges and the append-only audit log. Every list is paged (a cursor and a limit) and read through an
/// index; nothing here counts a whole table except ``userCounts()``, which the console caches.
public protocol ConsoleStore: Sendable {
    /// Appends `entry` to the audit log; returns it as stored.
    @discardableResult
    func appendAudit(_ entry: NewAuditEntry) async throws -> AuditEntry

    /// Appends `entries`, in their order, in one transaction (``appendAudit(_:)`` for each, one commit).
    func appendAudits(_ entries: [NewAuditEntry]) async throws

    /// The audit log, newest first, with ids below `before` when given.
    func auditEntries(before: Int64?, limit: Int) async throws -> [AuditEntry]

    /// The account with this email (normalized as sign-up stores it), if any.
    func user(email: String) async throws -> UserRecord?

    /// The account holding the App Store transaction `transactionId` (or the original transaction of that id), if any.
    func user(transactionId: String) async throws -> UserRecord?

    /// The guest of the installation whose device-secret hash is `installation`, if any.
    func user(installation: String) async throws -> UserRecord?

    /// Users newest first (creation time, then id), after `cursor` when given.
    func newestUsers(after cursor: UserCursor?, limit: Int) async throws -> [UserRecord]

    /// The installation (device-secret hash) of a guest; `nil` for an account or an unknown user.
    func installation(userId: String) async throws -> String?

    /// The account's sessions, newest first, at most `limit`.
    func sessions(userId: String, limit: Int) async throws -> [SessionSummary]

    /// The account's open holds, soonest to expire first, at most `limit`.
    func openHolds(userId: String, limit: Int) async throws -> [HoldRecord]

    /// The account's synced collections, by name.
    func collectionStats(userId: String) async throws -> [CollectionStats]

    /// The overview's totals of each UTC hour in `[from, to)` that has any: new users and ledger entries, read as index
    /// ranges on creation time. A bucket's ``PeriodTotals/since`` is its hour's start and its
    /// ``PeriodTotals/topReasons`` hold every ``SpendingGroup`` of the hour, most tokens first.
    func hourlyTotals(from: Date, to: Date) async throws -> [PeriodTotals]

    /// Users by kind (one count of the table: cached by the caller).
    func userCounts() async throws -> UserCounts

    /// Revokes every live session of the account and appends `audit` in one transaction; returns the sessions revoked.
    func revokeSessions(userId: String, audit: NewAuditEntry) async throws -> [String]

    /// Deletes the account as ``IdentityStore/deleteUser(id:)`` does and appends `audit` in the same transaction;
    /// returns whether it existed (nothing is appended when it did not).
    func deleteUser(id: String, audit: NewAuditEntry) async throws -> Bool
}
