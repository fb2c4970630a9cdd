import Foundation
import TallyAPI
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

@testable import TallyClient

/// A note as an app would model it: `notes` ranges by `date`.
struct Note: Codable, Sendable, Hashable {
    var date: String
    var text: String
    var done: Bool?
}

/// What the sync tests share: the server's collections (`notes`, and `answers`, metered by `ai.query` at 3 tokens),
/// the same declared on the client, and clients whose documents live in a temporary directory.
enum SyncedClientFixture {
    static let serverCollections = [
        CollectionSpec(name: "notes", rangeKey: "date"),
        CollectionSpec(name: "answers", action: ActionSpec(name: "ai.query", tokens: 3)),
    ]
    static let clientCollections = [SyncedCollectionSpec("notes", rangeKey: "date"), SyncedCollectionSpec("answers")]

    /// A fresh directory for one device's document files.
    static func directory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("synced-\(UUID().uuidString)", isDirectory: true)
    }

    /// The document files in `directory`.
    static func documentFiles(_ directory: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasPrefix("documents-") }
    }
}

extension TallyTestServer {
    /// ``with(_:catalog:configure:sourceLocation:_:)`` for a server declaring ``SyncedClientFixture/serverCollections``.
    static func withSync<T: Sendable>(
        _ kind: StoreKind, sourceLocation: SourceLocation = #_sourceLocation, _ body: @Sendable (TallyTestServer) async throws -> T
    ) async throws -> T {
        try await with(kind, configure: { $0.sync.collections = SyncedClientFixture.serverCollections }, sourceLocation: sourceLocation, body)
    }

    /// A client syncing ``SyncedClientFixture/clientCollections`` with its documents in `directory`, its own
    /// clock, no request-level retries (the engine's backoff is the one under test) and backoff draws of 0.5
    /// (every wait is on `clock`), and its event stream open, through a fault-injecting transport; `through` is where it
    /// connects instead of the server (a proxy in front of it).
    func syncedClient(
        directory: URL, clock: ManualClock = ManualClock(), secureStore: any SecureStore = MemorySecureStore(), through: URL? = nil
    ) -> (Client, FaultInjectingTransport, FaultInjectingEventStreamTransport) {
        let events = FaultInjectingEventStreamTransport(wrapping: URLSessionEventStreamTransport(baseURL: through ?? baseURL))
        let (client, transport) = self.client(clock: clock, secureStore: secureStore, retry: .none, through: through, eventStream: true) {
            configuration in
            configuration.collections = SyncedClientFixture.clientCollections
            configuration.documentsDirectory = directory
            configuration.eventStreamTransport = events
            configuration.random = { 0.5 }
        }
        return (client, transport, events)
    }

    /// Runs `body` with a signed-in guest's ``syncedClient(directory:clock:secureStore:)`` whose first sync is
    /// done, its documents in a fresh directory removed afterwards.
    func withSyncedClient<T: Sendable>(
        clock: ManualClock = ManualClock(), _ body: (Client, FaultInjectingTransport, URL) async throws -> T
    ) async throws -> T {
        let directory = SyncedClientFixture.directory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let (client, transport, _) = syncedClient(directory: directory, clock: clock)
        try await client.signInAsGuest()
        try await client.waitUntilSynced()
        return try await body(client, transport, directory)
    }

    /// Everything the server holds for the user of `client` (a pull from no cursor, straight to the server).
    func serverState(of client: Client) async throws -> SyncPullResponse {
        try await client.pull(cursor: nil, limit: 1_000)
    }
}

extension Client {
    /// Waits for the first sync status that satisfies `condition` (the current one included), driven by the
    /// status stream: no polling. The suite's time limit fails a status that never comes.
    func waitForSync(_ condition: (SyncStatus) -> Bool) async throws {
        for await status in syncStatusChanges where condition(status) { return }
        throw TestFailure("the status stream ended")
    }

    /// Waits until the first pull is done and nothing waits to be pushed.
    func waitUntilSynced() async throws {
        try await waitForSync { $0.lastSyncedAt != nil && $0.pendingMutations == 0 && !$0.isSyncing }
    }

    /// Waits until nothing the sign-in started still talks to the server, so that no answer of it comes later, as a
    /// sign that the server is back: the price list's background fetch has ended and the event stream has connected
    /// (its `connected` is handled before its first event, the user's wallet, which only the stream puts in the
    /// cache here). Yields, never sleeps; the suite's time limit fails a stream that never connects.
    func waitUntilQuiet() async throws {
        try await waitUntil { background.count == 0 && value(walletQuery) != nil }
    }

    /// The signed-in user's client id (the document store's).
    var syncClientId: String { get throws { try syncHost.engine().store.clientId } }
}

extension AsyncStream {
    /// The first element that satisfies `condition`; the suite's time limit fails one that never comes.
    func firstValue(where condition: (Element) -> Bool) async throws -> Element {
        for await element in self where condition(element) { return element }
        throw TestFailure("the stream ended")
    }
}
