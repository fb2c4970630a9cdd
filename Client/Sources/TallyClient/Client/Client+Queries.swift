import Foundation
import GRDB
import TallyAPI

extension Client {
    /// The current state of `query`, synchronously, for first paint. Does not fetch.
    /// Inlinable so the app's module specializes it for its value type: this is the cache-hit path.
    @inlinable
    public func state<Value>(_ query: Query<Value>) -> QueryState<Value> {
        let (snapshot, defined) = cache.snapshot(query.key, defining: Self.definition(query))
        if defined { registerRefetcher(query) }
        return Self.typed(snapshot)
    }

    /// The value to show for `query` right now, if any. Does not fetch.
    @inlinable
    public func value<Value>(_ query: Query<Value>) -> Value? { state(query).value }

    /// The value of `query`: a fresh cached value at once; a stale one at once while it is revalidated in
    /// the background; otherwise (nothing cached, older than `maxAge`, or `forceRefresh`) from the server.
    @discardableResult
    public func fetch<Value>(_ query: Query<Value>, forceRefresh: Bool = false) async throws -> Value {
        if !forceRefresh, let value = cachedAnswer(query) { return value }
        return try await revalidate(query)
    }

    /// The states of `query` as they change: the current state first, then every change (fetches,
    /// optimistic updates, confirmations, rollbacks), each once: a state equal to the last one sent is not
    /// sent again. A stale or missing value is fetched.
    public func observe<Value>(_ query: Query<Value>) -> AsyncStream<QueryState<Value>> {
        changes(of: query) { snapshot, _ in Self.typed(snapshot) }
    }

    /// The states of `query` with their signatures, for ``ObservedQuery``, which compares its first with the state it showed.
    func signedStates<Value>(_ query: Query<Value>) -> AsyncStream<(QueryState<Value>, QueryCache.Signature)> {
        changes(of: query) { snapshot, signature in (Self.typed(snapshot), signature) }
    }

    /// The state of `query` now, with its signature (see ``signedStates(_:)``).
    func signedState<Value>(_ query: Query<Value>) -> (QueryState<Value>, QueryCache.Signature) {
        define(query)
        let (snapshot, signature) = cache.signedSnapshot(query.key)
        return (Self.typed(snapshot), signature)
    }

    /// The changes of `query`, each made an `Element` by `element` (inside the cache's lock, in order).
    private func changes<Value, Element: Sendable>(
        of query: Query<Value>, _ element: @escaping @Sendable (QueryCache.Snapshot, QueryCache.Signature) -> Element
    ) -> AsyncStream<Element> {
        define(query)
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: .bufferingNewest(64))
        let id = cache.watch(query.key) { continuation.yield(element($0, $1)) }
        let (cache, background) = (self.cache, self.background)
        // A value that says when it stops being fresh (a daily generation: the user's next local midnight) is
        // refetched then, so a screen left open over midnight shows the new day's without the app doing anything.
        let refetcher = query.freshUntil == nil ? nil : background.start(isUserData: query.isUserData) { [self] in
            await refetchWhenFreshnessEnds(query)
        }
        continuation.onTermination = { _ in
            cache.unwatch(query.key, id: id)
            if let refetcher { background.cancel(refetcher) }
        }
        if state(query).isStale { revalidateInBackground(query) }
        return stream
    }

    /// Sleeps on the client's clock until the shown value's freshness (``Query/freshUntil``) ends, then refetches;
    /// until cancelled (the observation ended). No request is made while there is no value (the observation's own
    /// fetch brings it) or while the value is fresh. When the server's answer still ends in the past (its clock or
    /// day behind the phone's) or the fetch fails, it asks again after a pause that doubles from a minute to an hour.
    func refetchWhenFreshnessEnds<Value>(_ query: Query<Value>) async {
        guard let freshUntil = query.freshUntil else { return }
        let clock = configuration.clock
        var pause = Self.freshnessRetry.lowerBound
        do {
            while !Task.isCancelled {
                guard let end = state(query).value.flatMap(freshUntil) else {
                    try await clock.sleep(for: Self.freshnessRetry.lowerBound)
                    continue
                }
                let wait = end.timeIntervalSince(clock.now)
                if wait > 0 {
                    pause = Self.freshnessRetry.lowerBound
                    try await clock.sleep(for: wait)
                    continue
                }
                _ = try? await revalidate(query)
                if let next = state(query).value.flatMap(freshUntil), next > clock.now { continue }
                try await clock.sleep(for: pause)
                pause = min(pause * 2, Self.freshnessRetry.upperBound)
            }
        } catch {
            // Cancelled: the observation ended, or the user signed out.
        }
    }

    /// The pause before asking again for a value whose freshness the server's answer left in the past, in seconds.
    static let freshnessRetry: ClosedRange<TimeInterval> = 60...3600

    /// Writes `value` as `query`'s cached value, confirmed now (fresh, persisted), as if the server had just sent
    /// it: for a value the app learned elsewhere, such as its own backend's answer after a purchase. It replaces
    /// the cached value whatever its order (`supersedes` is not asked), clears the error, and discards a fetch
    /// already in flight. Mutations in flight keep their optimistic changes on top of it; their answers replace
    /// it when they settle if `supersedes` prefers them (a wallet with a higher version).
    public func setValue<Value>(_ value: Value, for query: Query<Value>) {
        define(query)
        guard let data = try? TallyJSON.encoder().encode(value) else { return }
        let confirmed = QueryCache.Confirmed(value: value, data: data, etag: nil, confirmedAt: configuration.clock.now, fromDisk: false)
        let generation = cache.generation
        cache.set(query.key, confirmed)
        persist(confirmed, key: query.key, isUserData: query.isUserData, generation: generation)
    }

    /// Marks `key` stale; observed values are refetched. After a change made on the server by someone else
    /// (the app's backend granted tokens), `invalidate(key: client.walletQuery.key)` shows it at once.
    public func invalidate(key: String) { refetch(cache.invalidate { $0 == key }) }

    /// Marks every key starting with `prefix` stale; observed values are refetched.
    public func invalidate(prefix: String) { refetch(cache.invalidate { $0.hasPrefix(prefix) }) }

    /// Call when the app returns to the foreground (SwiftUI: `scenePhase` becoming `.active`; UIKit:
    /// `didBecomeActiveNotification`). The event stream, closed in the background, reopens and catches up: the wallet,
    /// quotas and premium as they are now, and the documents changed meanwhile; observed values that are stale are
    /// refetched; synced documents written meanwhile by another process on the same file (a widget) reach their
    /// observers at once, without a network round trip, and then the outbox is pushed — at once, ending a wait after
    /// an outage — and the server's changes pulled.
    public func appDidBecomeActive() {
        if sharesDatabases { NotificationCenter.default.post(name: Database.resumeNotification, object: nil) }
        refetch(cache.watchedKeys.filter { cache.snapshot($0).isStale })
        syncHost.becameActive()
    }

    /// Call when the app goes to the background (SwiftUI: `scenePhase` becoming `.background`; UIKit:
    /// `didEnterBackgroundNotification`): the event stream closes, so the server holds no connection for an app that
    /// iOS is about to suspend, and an unreachable server is checked for every minute at most instead of every
    /// 1.5 s. Until ``appDidBecomeActive()``, changes made elsewhere (a grant, another device's edit) are not live;
    /// local writes are still pushed at once — except to a database in an App Group container (shared with a widget),
    /// which is suspended until then (GRDB's `Database.suspendNotification`): iOS kills an app suspended while it holds
    /// a lock on a file there, so a write to it in the background throws instead, and what was not pushed goes once active.
    public func appDidEnterBackground() {
        syncHost.enteredBackground()
        // A database in an App Group container takes no lock until the app is active again: iOS kills an app suspended
        // holding one (0xDEAD10CC). A write meanwhile throws (SQLITE_INTERRUPT); sync retries once active.
        if sharesDatabases { NotificationCenter.default.post(name: Database.suspendNotification, object: nil) }
    }

    // MARK: Internals

    /// The cached value `fetch` returns without waiting, if any (a stale one is revalidated in the
    /// background); counts the cache hit or miss.
    private func cachedAnswer<Value>(_ query: Query<Value>) -> Value? {
        let current = state(query)
        guard let value = current.value, let confirmedAt = current.confirmedAt else {
            metrics.recordCacheMiss()
            return nil
        }
        metrics.recordCacheHit()
        if !current.isStale { return value }
        guard configuration.clock.now.timeIntervalSince(confirmedAt) < query.maxAge else { return nil }
        revalidateInBackground(query)
        return value
    }

    /// Fetches `query` now (joining a fetch already in flight), revalidating with the ETag; returns the
    /// value shown once the answer is applied. Only the caller that starts the fetch decodes and writes
    /// the cache, and only it makes the closures to do so; those who join receive that value from the
    /// coalescer, and are counted once.
    @discardableResult
    func revalidate<Value>(_ query: Query<Value>) async throws -> Value {
        define(query)
        let (value, _) = try await reads.callers(of: Value.self).run(query.key) { [self] in
            let metrics = self.metrics
            let operation = query.operation
            return .init(
                operation: { [self] in try await load(query) },
                onShared: { metrics.recordCoalesced(operation: operation, count: $0) })
        }
        return value
    }

    /// One GET of `query`, applied to the cache; returns the value to show afterwards.
    private func load<Value>(_ query: Query<Value>) async throws -> Value {
        let ticket = cache.beginFetch(query.key)
        let outcome: QueryCache.FetchOutcome
        do {
            var headers: [String: String] = [:]
            if let etag = ticket.etag { headers["If-None-Match"] = etag }
            let response = try await executor.send(
                Endpoint(method: "GET", path: query.path, operation: query.operation, kind: .read, authenticated: query.isUserData),
                headers: headers, auth: userTokens())
            if response.status == 304 {
                metrics.recordNotModified()
                outcome = cache.finishFetch(ticket, .notModified)
            } else {
                let value = try decode(Value.self, response.body)
                let confirmed = QueryCache.Confirmed(
                    value: value, data: response.body, etag: response.header("ETag"), confirmedAt: configuration.clock.now,
                    fromDisk: false)
                outcome = cache.finishFetch(ticket, .value(confirmed))
            }
        } catch is CancellationError {
            // Abandoned (every caller left, or the user changed): not a failure of the query.
            cache.finishFetch(ticket, .abandoned)
            throw CancellationError()
        } catch {
            cache.finishFetch(ticket, .failed(.reported(error)))
            throw error
        }
        persist(outcome.stored, key: query.key, isUserData: query.isUserData, generation: ticket.generation)
        guard let value = outcome.value as? Value else { throw ClientError(.invalidResponse, message: "no value for \(query.key)") }
        return value
    }

    /// Revalidates `query` in a task no caller waits for; a change of user cancels it if the query is the user's.
    func revalidateInBackground<Value>(_ query: Query<Value>) {
        background.start(isUserData: query.isUserData) { [self] in _ = try? await revalidate(query) }
    }

    private func refetch(_ keys: [String]) {
        let refetchers = self.refetchers.withLock { all in keys.compactMap { all[$0] } }
        for refetcher in refetchers { refetcher(self) }
    }

    func define<Value>(_ query: Query<Value>) {
        if cache.define(query.key, Self.definition(query)) { registerRefetcher(query) }
    }

    @usableFromInline
    func registerRefetcher<Value>(_ query: Query<Value>) {
        refetchers.withLock { $0[query.key] = { client in client.revalidateInBackground(query) } }
    }

    @usableFromInline
    static func definition<Value>(_ query: Query<Value>) -> QueryCache.Definition {
        QueryCache.Definition(
            staleAfter: query.staleAfter,
            freshUntil: query.freshUntil.map { freshUntil in { @Sendable value in (value as? Value).flatMap(freshUntil) } },
            isUserData: query.isUserData,
            decode: { try TallyJSON.decoder().decode(Value.self, from: $0) },
            supersedes: { new, current in
                guard let new = new as? Value, let current = current as? Value else { return true }
                return query.supersedes(new, current)
            })
    }

    /// Writes a confirmed value to disk: shared when it belongs to no user, else for the signed-in user if the cache is
    /// still at `generation` (the one the value was read or confirmed in). Checked and written holding the user's lock,
    /// which a change of user holds while it clears the cache: a value of the user who left is never written as the
    /// next user's, nor after their entries were removed.
    func persist(_ confirmed: QueryCache.Confirmed?, key: String, isUserData: Bool, generation: UInt64) {
        guard let confirmed, let store = configuration.cacheStore else { return }
        let entry = PersistedEntry(key: key, data: confirmed.data, etag: confirmed.etag, confirmedAt: confirmed.confirmedAt)
        guard isUserData else {
            try? store.save(entry, userId: CacheNamespace.shared)
            return
        }
        userId.withLock { user in
            guard let user, cache.generation == generation else { return }
            try? store.save(entry, userId: user)
        }
    }

    func decode<Value: Decodable>(_ type: Value.Type, _ data: Data) throws -> Value { try decodeAnswer(type, data) }

    @inlinable
    static func typed<Value>(_ snapshot: QueryCache.Snapshot) -> QueryState<Value> {
        QueryState(
            value: snapshot.value as? Value, isStale: snapshot.isStale, isFetching: snapshot.isFetching, error: snapshot.error,
            confirmedAt: snapshot.confirmedAt, pendingMutations: snapshot.pending)
    }
}
