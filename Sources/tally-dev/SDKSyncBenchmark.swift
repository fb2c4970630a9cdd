import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization
import TallyAPI
import TallyClient
import TallyServer
import TallyStore

/// `tally-dev bench-sdk`'s synced-collection rows (issue 20): the device's own cost (a local write reaching an
/// observer, a month read from 10,000 documents) with the network cut so the sync engine sits in its backoff,
/// and what crosses loopback to a real server started in this process (SQLite in a temporary directory):
/// 1,000 queued changes pushed and confirmed, a fresh install restoring 10,000 documents, a write on one
/// device shown on the user's other device.
struct SDKSyncBenchmark {
    /// The rows, their units and targets, in the order printed.
    static let rows: [(String, String, String)] = [
        ("sync: local write → observer p50", "ms", ""), ("sync: local write → observer p99", "ms", "≤ 1 ms"),
        ("sync: 31 of 10,000 local documents p50", "ms", ""), ("sync: 31 of 10,000 local documents p99", "ms", "≤ 1 ms"),
        ("sync: 1,000 queued changes pushed and confirmed", "ms", "≤ 1,000 ms"),
        ("sync: fresh install restoring 10,000 documents", "ms", "≤ 1,000 ms"),
        ("sync: write → other device p50", "ms", ""), ("sync: write → other device p99", "ms", "≤ 100 ms"),
    ]

    /// A note as the benchmark writes it (`notes` ranges by `date`).
    struct Note: Codable, Sendable, Equatable {
        var date: String
        var text: String
    }

    let baseURL: URL
    let root: URL

    /// Runs `body` with a real server on a free loopback port declaring `notes`, stopped afterwards.
    static func withServer<T: Sendable>(_ body: @Sendable (SDKSyncBenchmark) async throws -> T) async throws -> T {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("tally-bench-sync-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        var configuration = TallyConfiguration()
        configuration.port = 0
        configuration.adminPort = 0
        configuration.bcryptCost = 4
        configuration.dataDirectory = root.appendingPathComponent("server").path
        configuration.metering.guestSignupsPerIPPerHour = 1_000_000
        // The last row writes 300 times in a row as fast as the other device shows them (~100 pushes a second): it
        // measures the event path, not the per-user push limit (120 a minute, which held it ~1 s at a time).
        configuration.limits.syncPushesPerUser = RateLimit(1_000_000, per: 60)
        configuration.sync.collections = [CollectionSpec(name: "notes", rangeKey: "date", maxDocuments: 100_000)]
        configuration.adminKey = "bench-sync-admin-key-0123456789abcdef"
        var logger = Logger(label: "tally.bench-sdk")
        logger.logLevel = .error
        let (ports, continuation) = AsyncStream.makeStream(of: ListenerPorts.self)
        let app = try buildApplication(configuration: configuration, logger: logger) { continuation.yield($0) }
        return try await withThrowingTaskGroup(of: Void.self) { group in
            let services = ServiceGroup(configuration: .init(services: [app], logger: logger))
            group.addTask { try await services.run() }
            var iterator = ports.makeAsyncIterator()
            guard let bound = await iterator.next() else { throw CancellationError() }
            defer { Task { await services.triggerGracefulShutdown() } }
            return try await body(SDKSyncBenchmark(baseURL: URL(string: "http://127.0.0.1:\(bound.port)")!, root: root))
        }
    }

    /// One device: a client syncing `notes` in `directory`, whose requests can be cut (``SwitchableTransport``).
    func device(_ directory: String, secureStore: any SecureStore = MemorySecureStore()) -> (Client, SwitchableTransport) {
        let transport = SwitchableTransport(wrapping: URLSessionTransport(baseURL: baseURL))
        var configuration = ClientConfiguration(baseURL: baseURL, secureStore: secureStore)
        configuration.transport = transport
        configuration.collections = [SyncedCollectionSpec("notes", rangeKey: "date")]
        configuration.documentsDirectory = root.appendingPathComponent(directory)
        configuration.metrics = ClientMetrics(exportLabel: nil)
        configuration.timeZone = nil
        return (Client(configuration: configuration), transport)
    }

    /// One measurement of every row.
    func measureOnce() async throws -> [String: Double] {
        var out: [String: Double] = [:]
        let run = UUID().uuidString.prefix(8)

        // 1. A local write reaching an observer, the network cut (the engine backs off instead of pushing).
        let appSecrets = MemorySecureStore()
        let (app, appNetwork) = device("local-\(run)", secureStore: appSecrets)
        try await app.signInAsGuest()
        try await app.waitUntilSynced()
        appNetwork.isOffline = true
        let notes = app.collection("notes", of: Note.self)
        var samples = try await Self.writeToObserver(
            writes: 1_000, write: { try notes.put(id: "probe", Note(date: "1999-12-31", text: "\($0)")) }, observed: notes.observe(id: "probe"))
        (out["sync: local write → observer p50"], out["sync: local write → observer p99"]) = Self.percentiles(&samples)

        // 2. A month of 31 days read from 10,000 documents, one a day from 2000-01-01, on the device.
        var day = DateComponents(calendar: Calendar(identifier: .gregorian), timeZone: TimeZone(identifier: "UTC"), year: 2000, month: 1, day: 1)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate]
        for index in 0..<10_000 {
            day.day = 1 + index
            try notes.put(id: "d\(index)", Note(date: formatter.string(from: day.date!), text: "day \(index)"))
        }
        samples.removeAll(keepingCapacity: true)
        for _ in 0..<1_000 {
            let start = ContinuousClock.now
            let month = try notes.documents(from: "2001-01-01", to: "2001-02-01")
            samples.append(Self.millis(.now - start))
            guard month.count == 31 else { throw BenchmarkFailure("the month has \(month.count) documents, not 31") }
        }
        (out["sync: 31 of 10,000 local documents p50"], out["sync: 31 of 10,000 local documents p99"]) = Self.percentiles(&samples)

        // 3. 1,000 changes queued offline, pushed and confirmed by the next launch: from its start to an empty outbox.
        let secrets = MemorySecureStore()
        let (offline, offlineNetwork) = device("queued-\(run)", secureStore: secrets)
        try await offline.signInAsGuest()
        try await offline.waitUntilSynced()
        offlineNetwork.isOffline = true  // and it stays so: this launch never pushes
        let queued = offline.collection("notes", of: Note.self)
        for index in 0..<1_000 { try queued.put(id: "q\(index)", Note(date: "2027-01-01", text: "queued \(index)")) }
        let (relaunched, _) = device("queued-\(run)", secureStore: secrets)
        var start = ContinuousClock.now
        _ = try await relaunched.restore()
        try await relaunched.waitUntilSynced()
        out["sync: 1,000 queued changes pushed and confirmed"] = Self.millis(.now - start)

        // 4. A fresh install of the user of rows 1–2 restoring its 10,000 documents (and the probe).
        let (uploader, _) = device("local-\(run)", secureStore: appSecrets)
        _ = try await uploader.restore()
        try await uploader.waitUntilSynced()
        let (fresh, _) = device("fresh-\(run)", secureStore: appSecrets)
        start = ContinuousClock.now
        _ = try await fresh.restore()
        try await fresh.waitUntilSynced()
        out["sync: fresh install restoring 10,000 documents"] = Self.millis(.now - start)
        let restored = try fresh.collection("notes", of: Note.self).documents().count
        guard restored == 10_001 else { throw BenchmarkFailure("the fresh install has \(restored) documents, not 10,001") }

        // 5. A write on one device shown on the user's other device, through the server's event stream and a pull.
        let (phone, _) = device("phone-\(run)")
        try await phone.signInAsGuest()
        let email = "bench-\(UUID().uuidString.prefix(12).lowercased())@example.com"
        _ = try await phone.link(email: email, password: "bench password 1")
        let (tablet, _) = device("tablet-\(run)")
        _ = try await tablet.signIn(email: email, password: "bench password 1")
        try await phone.waitUntilSynced()
        try await tablet.waitUntilSynced()
        let written = phone.collection("notes", of: Note.self)
        samples = try await Self.writeToObserver(
            writes: 300, write: { try written.put(id: "live", Note(date: "2027-01-01", text: "\($0)")) },
            observed: tablet.collection("notes", of: Note.self).observe(id: "live"))
        (out["sync: write → other device p50"], out["sync: write → other device p99"]) = Self.percentiles(&samples)

        for client in [app, offline, relaunched, uploader, fresh, phone, tablet] { try? await client.signOut(discardingPendingWrites: true) }
        return out
    }

    /// Makes `writes` writes (the `index`-th writes the text "index") and times each until `observed` shows it, in ms.
    static func writeToObserver(
        writes: Int, write: (Int) throws -> Void, observed: AsyncStream<Note?>
    ) async throws -> [Double] {
        let (seen, seenContinuation) = AsyncStream.makeStream(of: (String, ContinuousClock.Instant).self)
        let observer = Task {
            for await note in observed { if let note { seenContinuation.yield((note.text, .now)) } }
        }
        defer { observer.cancel() }
        var iterator = seen.makeAsyncIterator()
        var samples: [Double] = []
        for index in 0..<writes {
            let start = ContinuousClock.now
            try write(index)
            while let (text, when) = await iterator.next() {
                guard text == "\(index)" else { continue }
                samples.append(Self.millis(when - start))
                break
            }
        }
        return samples
    }

    static func millis(_ duration: Duration) -> Double { SDKBenchmark.micros(duration) / 1_000 }

    static func percentiles(_ samples: inout [Double]) -> (Double, Double) { SDKBenchmark.percentiles(&samples) }
}

/// A failed precondition of a benchmark (it measured something other than it says).
struct BenchmarkFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Passes requests through, or fails them as offline while ``isOffline`` is set (a device in airplane mode).
final class SwitchableTransport: HTTPTransport {
    private let wrapped: any HTTPTransport
    private let offline = Atomic<Bool>(false)

    init(wrapping wrapped: any HTTPTransport) { self.wrapped = wrapped }

    /// Whether requests fail at once as offline.
    var isOffline: Bool {
        get { offline.load(ordering: .relaxed) }
        set { offline.store(newValue, ordering: .relaxed) }
    }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        if isOffline { throw TransportError.offline }
        return try await wrapped.send(request)
    }
}

extension Client {
    /// Waits until a pull has completed and nothing waits in the outbox.
    func waitUntilSynced() async throws {
        for await status in syncStatusChanges where status.lastSyncedAt != nil && status.pendingMutations == 0 && !status.isSyncing {
            return
        }
        throw CancellationError()
    }
}
