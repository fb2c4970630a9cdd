import Foundation
import Synchronization
import TallySQLite
import TallyStore
import TallyTestKit
import Testing

// Every file of the target sees `StoreKind`, `postgresURL()`, `LedgerInvariants` and the rest of the shared support.
@_exported import TallyTestSupport

/// The instant every conformance test's clock starts at: 2027-01-15T08:00:00Z (17:00 in Tokyo, 03:00 in New York).
let defaultStart = Date(timeIntervalSince1970: 1_800_000_000)

/// A fresh random id (lowercase UUID), so tests sharing one PostgreSQL database never collide.
func randomId(_ prefix: String = "") -> String { prefix + UUID().uuidString.lowercased() }

/// Opens a fresh store of `kind`, migrated, with a ``ManualClock`` at `start`, and runs `body` with it.
/// Every failure names the store: the test argument, and this label in thrown harness errors.
///
/// SQLite gets a new file per test. PostgreSQL tests share one database and isolate themselves with
/// random ids; tests of server-wide operations (`expireHolds`, `purge`) pass `isolated: true` to get a
/// schema of their own, so they neither disturb nor are disturbed by other tests and servers. Without a
/// database a PostgreSQL case is skipped with a warning at the caller (failed under TALLY_REQUIRE_POSTGRES=1).
///
/// A PostgreSQL case runs `body` twice, each time on a fresh store and clock: on PostgreSQL itself, then once
/// through the PgBouncer in transaction mode that `scripts/with-pgbouncer` starts, as a managed database's pooler
/// port is used (``PostgresRoute/pgbouncer``): so the whole conformance suite also runs through a transaction
/// pooler, one pass more of its PostgreSQL cases and no more. A failure of that pass is one of the `postgres` case;
/// an error it throws names the pooler.
func withFixture(
    _ kind: StoreKind, start: Date = defaultStart, isolated: Bool = false, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: (Fixture) async throws -> Void
) async throws {
    switch kind {
    case .sqlite:
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-tests-\(randomId())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteStore(path: directory.appendingPathComponent("tally.sqlite").path)
        try await store.migrate()
        try await body(Fixture(store: store, kind: kind, clock: ManualClock(start)))
    case .postgres:
        for route in PostgresRoute.conformancePasses {
            try await withPostgresStore(isolated: isolated, route: route, sourceLocation: sourceLocation) { store in
                try await body(Fixture(store: store, kind: kind, clock: ManualClock(start)))
            }
        }
    }
}

/// Collects what a `render` closure saw, so tests can inspect the outcome of an execution.
final class OutcomeBox<Outcome: Sendable>: Sendable {
    private let value = Mutex<Outcome?>(nil)
    func set(_ outcome: Outcome) { value.withLock { $0 = outcome } }
    var outcome: Outcome? { value.withLock { $0 } }
}

/// The body a conformance test renders: derived from the outcome, so a replay that re-renders
/// (instead of returning the stored bytes) shows up as a different body.
struct RenderedBody: Codable, Equatable {
    var balance: Int64
    var held: Int64
    var version: Int64
    var entryId: Int64?
    var entryKind: String?
    var holdStatus: String?
    var payment: String?

    init(_ outcome: CommandOutcome) {
        balance = outcome.state.wallet.balance
        held = outcome.state.wallet.held
        version = outcome.state.wallet.version
        entryId = outcome.entry?.id
        entryKind = outcome.entry?.kind.rawValue
        holdStatus = outcome.hold?.status.rawValue
        payment = outcome.payment.map { "\($0)" }
    }

    static func render(_ outcome: CommandOutcome) throws -> StoredResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return StoredResponse(status: 200, body: Array(try encoder.encode(RenderedBody(outcome))))
    }

    static func decode(_ response: StoredResponse) throws -> RenderedBody {
        try JSONDecoder().decode(RenderedBody.self, from: Data(response.body))
    }
}

/// One store under test, its clock, and helpers that create isolated accounts.
struct Fixture: Sendable {
    let store: any TallyStorage
    let kind: StoreKind
    let clock: ManualClock

    var now: Date { clock.now }

    /// A refresh token that expires in 30 days.
    func refresh(expiresIn seconds: TimeInterval = 30 * 86_400) -> NewRefreshToken {
        NewRefreshToken(hash: randomId("rt-"), expiresAt: now.addingTimeInterval(seconds))
    }

    /// Signs in a guest with its own device (and, unless given, its own address).
    func signIn(
        device: String = randomId("dev-"), ip: String = randomId("ip-"), signupsPerHour: Int = 1_000,
        signupGrant: Int64 = 0, sessionId: String = randomId("ses-"), refresh: NewRefreshToken? = nil, sessionsPerUser: Int = 50
    ) async throws -> SessionGrant {
        try await store.signInGuest(
            deviceHash: device, ipHash: ip, signupsPerHour: signupsPerHour, signupGrant: signupGrant,
            sessionId: sessionId, refresh: refresh ?? self.refresh(), sessionsPerUser: sessionsPerUser, now: now)
    }

    /// A new guest holding `tokens` (granted by an admin grant, so the ledger has one entry when positive).
    func newUser(tokens: Int64 = 0) async throws -> String {
        let userId = try await signIn().user.id
        if tokens > 0 { try await run(.grant(userId: userId, amount: tokens, reason: "test")) }
        return userId
    }

    /// Executes `command` and returns the outcome the store rendered.
    @discardableResult
    func run(_ command: Command, key: IdempotencyKey? = nil) async throws -> CommandOutcome {
        let box = OutcomeBox<CommandOutcome>()
        let execution = try await store.execute(command, idempotency: key, now: now) { outcome in
            box.set(outcome)
            return try RenderedBody.render(outcome)
        }
        guard case .executed = execution, let outcome = box.outcome else {
            throw HarnessError("[\(kind)] expected the command to run, got \(execution)")
        }
        return outcome
    }

    /// Executes `command` with the standard renderer and returns the execution.
    func execute(_ command: Command, key: IdempotencyKey? = nil) async throws -> Execution {
        try await store.execute(command, idempotency: key, now: now) { try RenderedBody.render($0) }
    }

    /// Every ledger entry of the account, oldest first, read in pages of `pageSize` through `before:`.
    func allEntries(_ userId: String, pageSize: Int = 7, sourceLocation: SourceLocation = #_sourceLocation)
        async throws -> [LedgerEntryRecord]
    {
        var newestFirst: [LedgerEntryRecord] = []
        var before: Int64?
        while true {
            let page = try await store.entries(userId: userId, before: before, limit: pageSize)
            #expect(page.count <= pageSize, "[\(kind)] a page exceeds its limit", sourceLocation: sourceLocation)
            for (newer, older) in zip(page, page.dropFirst()) {
                #expect(newer.id > older.id, "[\(kind)] entries are not newest first", sourceLocation: sourceLocation)
            }
            if let before, let first = page.first {
                #expect(first.id < before, "[\(kind)] a page repeats entries", sourceLocation: sourceLocation)
            }
            newestFirst += page
            guard page.count == pageSize, let last = page.last else { break }
            before = last.id
        }
        return newestFirst.reversed()
    }

    /// The ledger invariants (``LedgerInvariants``), checked after every test that moves tokens: the entries, read
    /// page by page, replay to the wallet.
    func checkInvariants(_ userIds: [String], sourceLocation: SourceLocation = #_sourceLocation) async throws {
        for userId in userIds {
            let wallet = try #require(
                try await store.wallet(userId: userId, now: now), "[\(kind)] no wallet", sourceLocation: sourceLocation)
            let entries = try await allEntries(userId, sourceLocation: sourceLocation)
            expectLedgerInvariants(wallet, entries, "[\(kind)] user \(userId)", sourceLocation: sourceLocation)
        }
    }
}

/// Runs `body`, expecting a ``StoreError`` with `code`; returns it for further checks.
@discardableResult
func expectStoreError<T>(
    _ code: StoreError.Code, _ kind: StoreKind, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> T
) async -> StoreError? {
    do {
        let value = try await body()
        Issue.record("[\(kind)] expected StoreError(\(code)), got \(value)", sourceLocation: sourceLocation)
        return nil
    } catch let error as StoreError {
        #expect(error.code == code, "[\(kind)] expected StoreError(\(code))", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("[\(kind)] expected StoreError(\(code)), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// The result of one of many concurrent calls.
enum Attempt<Value: Sendable>: Sendable {
    case success(Value)
    case failure(StoreError)
    case other(String)
}

/// What concurrent calls sharing one idempotency key got, sorted: the one that ran, byte-for-byte replays of it,
/// refusals because the key was in flight, and anything else (always wrong).
struct KeyedAttempts {
    var executed: [StoredResponse] = []
    var replayed: [StoredResponse] = []
    var inUse = 0
    var unexpected: [String] = []

    init(_ attempts: [Attempt<Execution>]) {
        for attempt in attempts {
            switch attempt {
            case .success(.executed(let response)): executed.append(response)
            case .success(.replayed(let response)): replayed.append(response)
            case .failure(let error) where error.code == .idempotencyKeyInUse: inUse += 1
            case .failure(let error): unexpected.append("\(error)")
            case .other(let error): unexpected.append(error)
            }
        }
    }

    /// Exactly one call ran, and every other call of the `count` got a byte-identical replay of its response or
    /// `idempotencyKeyInUse`; returns the response of the one that ran.
    @discardableResult
    func expectOneCharge(of count: Int, _ label: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> StoredResponse {
        #expect(executed.count == 1, "\(label) \(executed.count) calls ran", sourceLocation: sourceLocation)
        #expect(
            executed.count + replayed.count + inUse == count && unexpected.isEmpty, "\(label) \(unexpected)",
            sourceLocation: sourceLocation)
        let original = try #require(executed.first, "\(label) no call ran", sourceLocation: sourceLocation)
        #expect(replayed.allSatisfy { $0 == original }, "\(label) a replay differs from the first response", sourceLocation: sourceLocation)
        return original
    }
}

/// Runs `body(0..<count)` concurrently and collects what each call did.
func concurrently<Value: Sendable>(
    _ count: Int, _ body: @escaping @Sendable (Int) async throws -> Value
) async throws -> [Attempt<Value>] {
    try await withThrowingTaskGroup(of: Attempt<Value>.self) { group in
        for index in 0..<count {
            group.addTask {
                do {
                    return .success(try await body(index))
                } catch let error as StoreError {
                    return .failure(error)
                } catch {
                    return .other("\(error)")
                }
            }
        }
        var attempts: [Attempt<Value>] = []
        for try await attempt in group { attempts.append(attempt) }
        return attempts
    }
}
