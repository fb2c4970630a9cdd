import Foundation
import Histogram

/// The books check's result over every account.
public struct BooksResult: Sendable, Codable, Hashable, ViolationTally {
    /// Accounts checked.
    public var accounts = 0
    /// Accounts whose books could not be read.
    public var unreadable = 0
    /// Every violation found (the first 100 are kept; `violationCount` counts all).
    public var violations: [Violation] = []
    /// How many violations there were.
    public var violationCount = 0
    /// Grants, token charges and captures the tool saw succeed, and requests refused with a 4xx.
    public var grants = 0, debits = 0, captures = 0, refused = 0
    /// Actions whose outcome the SDK never learnt (each checked as charged at most once).
    public var uncertain = 0

    /// The synced documents' check (sync users only).
    public var sync = SyncBooksResult()

    /// Whether every account balanced, documents included.
    public var balanced: Bool { violationCount == 0 && unreadable == 0 && sync.balanced }

    mutating func add(_ expectation: ExpectedBooks, violations found: [Violation]?) {
        accounts += 1
        grants += expectation.grants.count
        debits += expectation.debits.values.reduce(0, +)
        captures += expectation.holds.values.filter { if case .captured = $0 { true } else { false } }.count
        refused += expectation.refused
        uncertain += expectation.uncertain.values.reduce(0, +)
        tally(found)
    }
}

/// The sync users' check: every acknowledged mutation on the server exactly once (``SyncBooksChecker``).
public struct SyncBooksResult: Sendable, Codable, Hashable, ViolationTally {
    /// Sync users checked.
    public var users = 0
    /// Users whose documents could not be read, or whose outbox could not be emptied at the end.
    public var unreadable = 0, unsettled = 0
    /// Mutations made, pushes answered, mutations answered `duplicate` (resent batches), events received.
    public var mutations = 0, pushes = 0, duplicates = 0, changedEvents = 0, walletEvents = 0
    /// Every violation found (the first 100 are kept; `violationCount` counts all).
    public var violations: [Violation] = []
    /// How many violations there were.
    public var violationCount = 0

    /// Whether every sync user's documents are exactly the replay of what it pushed.
    public var balanced: Bool { violationCount == 0 && unreadable == 0 && unsettled == 0 }

    mutating func add(_ user: SyncUser, settled: Bool, violations found: [Violation]?) {
        users += 1
        let expectation = user.expectation
        mutations += expectation.mutations.count
        pushes += expectation.pushes
        duplicates += expectation.duplicates
        changedEvents += user.eventCounts.changed
        walletEvents += user.eventCounts.wallet
        if !settled { unsettled += 1 }
        tally(found)
    }
}

/// A check's count of what it could not read and of what it found wrong (``BooksResult``, ``SyncBooksResult``).
protocol ViolationTally {
    /// What could not be read.
    var unreadable: Int { get set }
    /// The first 100 violations.
    var violations: [Violation] { get set }
    /// How many violations there were.
    var violationCount: Int { get set }
}

extension ViolationTally {
    /// Counts the violations `found` in one account or user (nil: it could not be read), keeping the first 100 of all.
    mutating func tally(_ found: [Violation]?) {
        guard let found else {
            unreadable += 1
            return
        }
        violationCount += found.count
        violations += found.prefix(max(0, 100 - violations.count))
    }
}

/// Latency and outcomes of one operation over the measured phase.
public struct OperationSummary: Sendable, Codable, Hashable {
    /// The operation's name.
    public var name: String
    /// Requests completed.
    public var count: Int
    /// Completed per second of the measured phase.
    public var perSecond: Double
    /// Latency percentiles and maximum, milliseconds.
    public var p50: Double, p95: Double, p99: Double, max: Double
    /// Requests by status (or transport failure).
    public var outcomes: [String: Int]
    /// Of those, errors (unexpected statuses, no answer).
    public var errors: Int
    /// Transport failures that were retried.
    public var retries: Int

    init(name: String, _ operation: LatencyRecorder.Operation, seconds: Double) {
        self.name = name
        let histogram = operation.histogram
        count = Int(histogram.totalCount)
        perSecond = seconds > 0 ? Double(count) / seconds : 0
        p50 = Double(histogram.valueAtPercentile(50)) / 1000
        p95 = Double(histogram.valueAtPercentile(95)) / 1000
        p99 = Double(histogram.valueAtPercentile(99)) / 1000
        max = Double(histogram.max) / 1000
        outcomes = operation.outcomes.mapValues(\.count)
        errors = operation.outcomes.values.filter(\.isError).reduce(0) { $0 + $1.count }
        retries = operation.retries
    }
}

/// One second of the measured phase.
public struct TimelinePoint: Sendable, Codable, Hashable {
    /// Seconds from the start.
    public var second: Int
    /// Requests completed in it.
    public var count: Int
    /// Their p50 and p99 latency, milliseconds.
    public var p50: Double, p99: Double
    /// Errors in it.
    public var errors: Int
}

/// Everything a run measured and found; rendered as Markdown, JSON and an SVG chart.
public struct LoadReport: Sendable, Codable {
    /// Users, mode and duration as asked.
    public var users: Int, sdkUsers: Int, syncUsers: Int, mode: String, durationSeconds: Double, seed: UInt64
    /// Servers driven.
    public var servers: [String]
    /// The actions used.
    public var quotaAction: String, tokenAction: String
    /// Set-up time and users ready.
    public var setupSeconds: Double, usersReady: Int
    /// The measured phase's length (including the drain of operations still queued at its end).
    public var measuredSeconds: Double
    /// Per operation, measured phase.
    public var operations: [OperationSummary]
    /// Every operation together.
    public var total: OperationSummary
    /// Per operation, set-up and books check.
    public var setup: [OperationSummary]
    /// Per second of the measured phase.
    public var timeline: [TimelinePoint]
    /// CPU and memory of the servers and the load tool.
    public var samples: [ProcessSample]
    /// The servers' and the database's CPU per operation over the measured phase.
    public var cost: OperationCost
    /// The SDK users' logical reads against requests that reached the server.
    public var sdk: SDKReadCounts
    /// The books check.
    public var books: BooksResult
    /// Faults injected.
    public var faults: [String]

    init(
        options: LoadOptions, actions: ScenarioActions, setupSeconds: Double, usersReady: Int, measuredSeconds: Double,
        operations: [String: LatencyRecorder.Operation], timeline: [LatencyRecorder.Second],
        setup: [String: LatencyRecorder.Operation], samples: [ProcessSample], sdk: SDKReadCounts, books: BooksResult,
        faults: [String], cost: OperationCost
    ) {
        users = options.users
        sdkUsers = options.sdkUsers
        syncUsers = options.syncUsers
        mode = switch options.mode {
        case .open(let rate): "open loop, \(Int(rate)) operations/s"
        case .closed(let workers): "closed loop, \(workers) workers"
        }
        durationSeconds = ProcessSampler.seconds(options.duration)
        seed = options.seed
        servers = options.servers.map(\.absoluteString)
        quotaAction = actions.quotaAction
        tokenAction = actions.tokenAction
        self.setupSeconds = setupSeconds
        self.usersReady = usersReady
        self.measuredSeconds = measuredSeconds
        let seconds = ProcessSampler.seconds(options.duration)
        self.operations = operations.keys.sorted().map { OperationSummary(name: $0, operations[$0]!, seconds: seconds) }
        var all = LatencyRecorder.Operation()
        for operation in operations.values {
            all.histogram.add(operation.histogram)
            for (label, value) in operation.outcomes { all.outcomes[label, default: (0, value.isError)].count += value.count }
            all.retries += operation.retries
        }
        total = OperationSummary(name: "all", all, seconds: seconds)
        self.setup = setup.keys.sorted().map { OperationSummary(name: $0, setup[$0]!, seconds: max(setupSeconds, 0.001)) }
        self.timeline = timeline.enumerated().map { index, second in
            TimelinePoint(
                second: index, count: Int(second.histogram.totalCount),
                p50: Double(second.histogram.valueAtPercentile(50)) / 1000, p99: Double(second.histogram.valueAtPercentile(99)) / 1000,
                errors: second.errors)
        }
        self.samples = samples
        self.sdk = sdk
        self.books = books
        self.faults = faults
        self.cost = cost
    }

    /// What the servers did through a database outage, when the run injected one.
    public var outage: OutageResult?

    /// Whether the run passed: books balanced, every user ready, and the outage (if any) weathered as promised.
    public var passed: Bool { books.balanced && usersReady == users && outage?.passed != false }

    /// The report as pretty JSON.
    public func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return try encoder.encode(self)
    }
}
