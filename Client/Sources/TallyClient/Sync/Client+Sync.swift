import Foundation
import TallyAPI

extension Client {
    /// Where the signed-in user's synced documents stand now: pending changes, last sync, offline, syncing.
    public var syncStatus: SyncStatus { sync.status }

    /// ``syncStatus`` now, then each change: for a "saved / syncing / offline" badge.
    public var syncStatusChanges: AsyncStream<SyncStatus> { sync.statusChanges() }

    /// The local changes the server refused from now on (conflicts, rejections), each once, already rolled back.
    public var syncEvents: AsyncStream<SyncEvent> { sync.events() }

    /// The synced collection `name` (listed in ``ClientConfiguration/collections``), its documents decoded as
    /// `Value`: e.g. `client.collection("habit_logs", of: HabitLog.self)`.
    public func collection<Value: Codable & Sendable>(_ name: String, of type: Value.Type = Value.self) -> SyncedCollection<Value> {
        SyncedCollection(client: self, name: name)
    }

    // MARK: Engine

    /// The file of a user's documents, or nil when the client syncs no collection (sign-out removes it).
    static func documentsFile(_ configuration: ClientConfiguration) -> @Sendable (_ userId: String) -> URL? {
        guard !configuration.collections.isEmpty, let directory = try? documentsDirectory(configuration) else { return { _ in nil } }
        return { LocalDocumentStore.path(directory: directory, userId: $0) }
    }

    static func documentsDirectory(_ configuration: ClientConfiguration) throws -> URL {
        if let directory = configuration.documentsDirectory { return directory }
        guard let support = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first else {
            throw ClientError(.unexpected, message: "no application support directory")
        }
        return support.appendingPathComponent("Tally", isDirectory: true)
    }

    /// Opens `userId`'s document store and makes the engine that syncs it (not started).
    func makeSyncEngine(userId: String) throws -> SyncEngine {
        let directory = try Self.documentsDirectory(configuration)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let rangeKeys = Dictionary(configuration.collections.map { ($0.name, $0.rangeKey) }, uniquingKeysWith: { first, _ in first })
        let store = try LocalDocumentStore(
            path: LocalDocumentStore.path(directory: directory, userId: userId).path, rangeKeys: rangeKeys, clock: configuration.clock)
        let session = self.session
        let transport = configuration.eventStreamTransport ?? URLSessionEventStreamTransport(baseURL: configuration.baseURL)
        let clock = configuration.clock
        let random = configuration.random
        let remote = SyncRemote(
            push: { [weak self] clientId, mutations in
                guard let self else { throw CancellationError() }
                return try await self.push(clientId: clientId, mutations: mutations)
            },
            pull: { [weak self] cursor, limit in
                guard let self else { throw CancellationError() }
                return try await self.pull(cursor: cursor, limit: limit)
            },
            events: { lastEventId in
                ServerEventStream(transport: transport, clock: clock, random: random, lastEventId: lastEventId) { refused in
                    if let refused { try await session.refresh(after: refused) }
                    return try await session.accessToken()
                }
            },
            wallet: { [weak self] event in self?.confirmFromServer(event) })
        return SyncEngine(userId: userId, store: store, remote: remote, clock: clock, random: random, host: sync)
    }

    /// A `wallet` event's wallet and quotas, confirmed as a server answer would be: a wallet older than the one
    /// shown (a lower version) does not replace it; optimistic changes in flight stay on top.
    func confirmFromServer(_ event: SyncWalletEvent) {
        let walletQuery = self.walletQuery
        let quotasQuery = self.quotasQuery
        define(walletQuery)
        define(quotasQuery)
        confirm([Confirmation.of(walletQuery, event.wallet), Confirmation.of(quotasQuery, QuotaList(items: event.quotas))].compactMap { $0 })
    }
}
