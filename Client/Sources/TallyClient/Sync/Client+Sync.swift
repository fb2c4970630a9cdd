import Foundation
import TallyAPI

extension Client {
    /// Where the signed-in user's synced documents stand now: pending changes, last sync, offline, syncing.
    public var syncStatus: SyncStatus { syncHost.status }

    /// ``syncStatus`` now, then each change: for a "saved / syncing / offline" badge.
    public var syncStatusChanges: AsyncStream<SyncStatus> { syncHost.statusChanges() }

    /// The local changes the server refused from now on (conflicts, rejections), each once, already rolled back.
    public var syncEvents: AsyncStream<SyncEvent> { syncHost.events() }

    /// Sync on demand: ``SyncClient/now()`` sends every local change and pulls the server's, now.
    public var sync: SyncClient { SyncClient(client: self) }

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
        // The user's tokens only: a push of this outbox must never go as another user.
        let tokens = session.tokens(of: userId)
        let remote = SyncRemote(
            push: { [weak self] clientId, mutations in
                guard let self else { throw CancellationError() }
                return try await self.push(clientId: clientId, mutations: mutations, auth: tokens)
            },
            pull: { [weak self] cursor, limit in
                guard let self else { throw CancellationError() }
                return try await self.pull(cursor: cursor, limit: limit, auth: tokens)
            },
            probe: { [weak self] in
                guard let self else { throw CancellationError() }
                try await self.probe()
            })
        return SyncEngine(userId: userId, store: store, remote: remote, clock: configuration.clock, random: configuration.random, host: syncHost)
    }

    /// `userId`'s event stream, resuming from `lastEventId`: through the client's streaming transport (the AI streams'
    /// session), reconnecting on ``SyncSchedule``'s short backoff when the server does not answer — a wait any sign that
    /// the server is back ends —, with the user's access token (refreshed once after a 401; refused once they left).
    func liveEventStream(userId: String, lastEventId: String?) -> ServerEventStream {
        let tokens = session.tokens(of: userId)
        return ServerEventStream(
            transport: streams.transport(configuration), clock: configuration.clock, offlineRetry: SyncSchedule.unreachableActive,
            random: configuration.random, lastEventId: lastEventId, reachability: syncHost.reachability
        ) { refused in
            if let refused { try await tokens.refresh(after: refused) }
            return try await tokens.accessToken()
        }
    }

    /// A `wallet` event of `userId`'s stream, unless another user is signed in by now: its wallet and quotas confirmed
    /// as a server answer would be — a wallet older than the one shown (a lower version) does not replace it,
    /// optimistic changes in flight stay on top — and, when the event says the user's premium and it differs from
    /// the cached profile's, the profile with the event's premium (``premiumStatus(forceRefresh:)`` follows it).
    func confirmFromServer(_ event: SyncWalletEvent, of userId: String) {
        guard self.userId.withLock({ $0 }) == userId else { return }
        confirmFromServer(event)
    }

    /// A `wallet` event's wallet, quotas and premium, confirmed (see ``confirmFromServer(_:of:)``).
    func confirmFromServer(_ event: SyncWalletEvent) {
        let walletQuery = self.walletQuery
        let quotasQuery = self.quotasQuery
        define(walletQuery)
        define(quotasQuery)
        var confirmations = [Confirmation.of(walletQuery, event.wallet), Confirmation.of(quotasQuery, QuotaList(items: event.quotas))]
        let meQuery = self.meQuery
        if event.reportsPremium, var me = value(meQuery), me.premiumUntil != event.premiumUntil {
            me.premiumUntil = event.premiumUntil
            confirmations.append(Confirmation.of(meQuery, me))
        }
        confirm(confirmations.compactMap { $0 })
    }
}
