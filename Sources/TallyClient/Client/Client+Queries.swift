import Foundation
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
        let current = state(query)
        if !forceRefresh, let value = current.value, let confirmedAt = current.confirmedAt {
            metrics.recordCacheHit()
            if current.isStale {
                if configuration.clock.now.timeIntervalSince(confirmedAt) < query.maxAge {
                    revalidateInBackground(query)
                    return value
                }
            } else {
                return value
            }
        } else if !forceRefresh {
            metrics.recordCacheMiss()
        }
        try await revalidate(query)
        guard let value = value(query) else { throw ClientError.invalidResponse("no value for \(query.key)") }
        return value
    }

    /// The states of `query` as they change: the current state first, then every change (fetches,
    /// optimistic updates, confirmations, rollbacks). A stale or missing value is fetched.
    public func observe<Value>(_ query: Query<Value>) -> AsyncStream<QueryState<Value>> {
        define(query)
        let (stream, continuation) = AsyncStream.makeStream(of: QueryState<Value>.self, bufferingPolicy: .bufferingNewest(64))
        let id = cache.watch(query.key) { continuation.yield(Self.typed($0)) }
        let cache = self.cache
        continuation.onTermination = { _ in cache.unwatch(query.key, id: id) }
        if state(query).isStale { revalidateInBackground(query) }
        return stream
    }

    /// Marks `key` stale; observed values are refetched.
    public func invalidate(key: String) { refetch(cache.invalidate { $0 == key }) }

    /// Marks every key starting with `prefix` stale; observed values are refetched.
    public func invalidate(prefix: String) { refetch(cache.invalidate { $0.hasPrefix(prefix) }) }

    /// Call when the app returns to the foreground: observed values that are stale are refetched.
    public func appDidBecomeActive() {
        refetch(cache.watchedKeys.filter { cache.snapshot($0).isStale })
    }

    // MARK: Internals

    /// Fetches `query` now (joining a fetch already in flight), revalidating with the ETag.
    func revalidate<Value>(_ query: Query<Value>) async throws {
        define(query)
        let (_, shared) = try await reads.run(query.key) { [self] in
            let ticket = cache.beginFetch(query.key)
            do {
                var headers: [String: String] = [:]
                if let etag = ticket.etag { headers["If-None-Match"] = etag }
                let response = try await executor.send(
                    Endpoint(method: "GET", path: query.path, operation: query.operation, kind: .read), headers: headers,
                    auth: session)
                if response.status == 304 {
                    metrics.recordNotModified()
                    persist(cache.finishFetch(ticket, .notModified), key: query.key)
                    return
                }
                let value = try decode(Value.self, response.body)
                let confirmed = QueryCache.Confirmed(
                    value: value, data: response.body, etag: response.header("ETag"), confirmedAt: configuration.clock.now,
                    fromDisk: false)
                persist(cache.finishFetch(ticket, .value(confirmed)), key: query.key)
            } catch let error as ClientError {
                cache.finishFetch(ticket, .failed(error))
                throw error
            } catch {
                cache.finishFetch(ticket, .failed(.offline))
                throw error
            }
        }
        if shared { metrics.recordCoalesced(operation: query.operation) }
    }

    func revalidateInBackground<Value>(_ query: Query<Value>) {
        Task { try? await self.revalidate(query) }
    }

    private func refetch(_ keys: [String]) {
        let refetchers = self.refetchers.withLock { all in keys.compactMap { all[$0] } }
        for refetcher in refetchers { Task { await refetcher(self) } }
    }

    func define<Value>(_ query: Query<Value>) {
        if cache.define(query.key, Self.definition(query)) { registerRefetcher(query) }
    }

    @usableFromInline
    func registerRefetcher<Value>(_ query: Query<Value>) {
        refetchers.withLock { $0[query.key] = { client in try? await client.revalidate(query) } }
    }

    @usableFromInline
    static func definition<Value>(_ query: Query<Value>) -> QueryCache.Definition {
        QueryCache.Definition(
            staleAfter: query.staleAfter,
            decode: { try TallyJSON.decoder().decode(Value.self, from: $0) },
            supersedes: { new, current in
                guard let new = new as? Value, let current = current as? Value else { return true }
                return query.supersedes(new, current)
            })
    }

    /// Writes a confirmed value to disk for the signed-in user (outside every lock).
    func persist(_ confirmed: QueryCache.Confirmed?, key: String) {
        guard let confirmed, let store = configuration.cacheStore, let user = userId.withLock({ $0 }) else { return }
        try? store.save(PersistedEntry(key: key, data: confirmed.data, etag: confirmed.etag, confirmedAt: confirmed.confirmedAt), userId: user)
    }

    func decode<Value: Decodable>(_ type: Value.Type, _ data: Data) throws -> Value { try decodeAnswer(type, data) }

    @inlinable
    static func typed<Value>(_ snapshot: QueryCache.Snapshot) -> QueryState<Value> {
        QueryState(
            value: snapshot.value as? Value, isStale: snapshot.isStale, isFetching: snapshot.isFetching, error: snapshot.error,
            confirmedAt: snapshot.confirmedAt, pendingMutations: snapshot.pending)
    }
}
