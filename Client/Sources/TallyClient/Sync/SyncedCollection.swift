import Foundation
import TallyAPI

/// A synced document as the app sees it on the device: the server's state with this device's unconfirmed
/// changes on top.
public struct SyncedDocument<Value: Sendable>: Sendable {
    /// The document's id in its collection.
    public var id: String
    /// Its fields, decoded.
    public var value: Value
    /// The version of the server state underneath (0: the server has none yet): pass it as `ifVersion` for a
    /// strict update.
    public var version: Int64
    /// When the server state underneath last changed; nil when there is none.
    public var updatedAt: Date?
    /// Whether local changes to it wait for the server ("syncing").
    public var isPending: Bool
}

extension SyncedDocument: Equatable where Value: Equatable {}
extension SyncedDocument: Hashable where Value: Hashable {}

/// One synced collection of the signed-in user, its documents decoded as `Value` (``Client/collection(_:of:)``).
///
/// Writes apply to the device at once (observers are told before they return) and are pushed in order in the
/// background, exactly once, surviving offline periods, crashes and relaunches. Reads answer from the device.
/// Every call throws ``ClientError/Code/unauthorized`` when no user is signed in.
public struct SyncedCollection<Value: Codable & Sendable>: Sendable {
    let client: Client
    /// The collection's name.
    public let name: String

    // MARK: Writes

    /// Creates or replaces the document `id` with `value`. With `ifVersion`, the server applies it only while the
    /// document's version is that (0: only while it does not exist); otherwise it rolls back and is reported
    /// on ``Client/syncEvents`` as a conflict.
    public func put(id: String, _ value: Value, ifVersion: Int64? = nil) throws {
        let engine = try client.syncHost.engine()
        try commit(.put(key(id), try Self.encode(value), ifVersion: ifVersion), engine)
    }

    /// Changes the document `id` to `value`, sending only the fields that differ from what the device shows (a
    /// merge patch), so another device's edits of other fields are kept. An absent document is created (a put).
    /// Nothing is written when nothing changed.
    public func patch(id: String, _ value: Value, ifVersion: Int64? = nil) throws {
        let engine = try client.syncHost.engine()
        let key = key(id)
        let new = try Self.encode(value)
        guard let current = try engine.store.document(key) else {
            return try commit(.put(key, new, ifVersion: ifVersion), engine)
        }
        let patch = JSONValue.mergePatch(from: current.data, to: new)
        if patch == .object([:]), ifVersion == nil { return }
        try commit(.patch(key, patch, ifVersion: ifVersion), engine)
    }

    /// Deletes the document `id` (with `ifVersion`: only while its version is that).
    public func delete(id: String, ifVersion: Int64? = nil) throws {
        let engine = try client.syncHost.engine()
        try commit(.delete(key(id), ifVersion: ifVersion), engine)
    }

    private func commit(_ write: LocalWrite, _ engine: SyncEngine) throws {
        try engine.store.write(write)
        engine.localWriteCommitted()
    }

    // MARK: Reads

    /// The document `id`'s value as the device shows it, or nil.
    public func get(id: String) throws -> Value? { try document(id: id)?.value }

    /// The document `id` with its version and pending state, or nil.
    public func document(id: String) throws -> SyncedDocument<Value>? {
        try client.syncHost.engine().store.document(key(id)).map(Self.decode)
    }

    /// The documents whose range key is in `from..<to` (either bound optional; none: the whole collection),
    /// ordered by range key then id (`descending`: newest first), at most `limit`: from the device, index-driven.
    public func documents(from: String? = nil, to: String? = nil, descending: Bool = false, limit: Int? = nil) throws
        -> [SyncedDocument<Value>]
    {
        try client.syncHost.engine().store.documents(in: name, from: from, to: to, descending: descending, limit: limit).map(Self.decode)
    }

    /// The document `id`'s value now, then after every change (local writes at once; pulls, rollbacks and
    /// other processes' writes as they land), each distinct state once. Ends when the user signs out (at once
    /// when no user is signed in).
    public func observe(id: String) -> AsyncStream<Value?> {
        let key = DocumentKey(collection: name, id: id)
        return watch(read: { store in try store.document(key).map { [$0] } ?? [] }, touches: { $0 == key }) { documents in
            documents.first.flatMap { try? Self.decode($0).value }
        }
    }

    /// ``documents(from:to:descending:limit:)`` now, then after every change in the collection, each distinct
    /// result once until the user signs out (a month of habit logs: `observe(from: "2026-11-01", to: "2026-12-01")`). A document that does
    /// not decode as `Value` is left out.
    public func observe(from: String? = nil, to: String? = nil, descending: Bool = false) -> AsyncStream<[SyncedDocument<Value>]> {
        let name = self.name
        return watch(read: { store in try store.documents(in: name, from: from, to: to, descending: descending) },
                     touches: { $0.collection == name }) { documents in documents.compactMap { try? Self.decode($0) } }
    }

    /// The collection's documents on the server, page by page (``RemotePages``), for histories too long to keep on the device.
    public func remotePages(_ range: RemoteRange = RemoteRange()) -> RemotePages { client.remotePages(name, range) }

    // MARK: Internals

    /// A stream of `element(read(store))`, sent now and after each commit that `touches` a key (or after another
    /// process's), when the documents read differ from the last sent. Read and sent under one lock, so the
    /// stream never goes back to an older state when commits on two threads notify at once.
    private func watch<Element: Sendable>(
        read: @escaping @Sendable (LocalDocumentStore) throws -> [LocalDocument], touches: @escaping @Sendable (DocumentKey) -> Bool,
        element: @escaping @Sendable ([LocalDocument]) -> Element
    ) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: .bufferingNewest(64))
        guard let engine = try? client.syncHost.engine() else {
            continuation.finish()
            return stream
        }
        let store = engine.store
        let last = Locked<[LocalDocument]?>(nil)
        let send: @Sendable () -> Void = {
            last.withLock { last in
                guard let documents = try? read(store), documents != last else { return }
                last = documents
                continuation.yield(element(documents))
            }
        }
        let id = store.addObserver { change in
            switch change {
            case .everything: send()
            case .documents(let keys): if keys.contains(where: touches) { send() }
            }
        }
        let closing = engine.onClose { continuation.finish() }
        continuation.onTermination = { _ in
            store.removeObserver(id)
            engine.removeCloseHandler(closing)
        }
        send()
        return stream
    }

    private func key(_ id: String) -> DocumentKey { DocumentKey(collection: name, id: id) }

    static func encode(_ value: Value) throws -> JSONValue {
        // A collection of JSON values keeps them exactly: a `JSONEncoder` merges object keys that are canonically
        // equivalent and rounds numbers through `Double`.
        if let value = value as? JSONValue { return value }
        do {
            return try JSONValue.parse(TallyJSON.encoder().encode(value))
        } catch {
            throw ClientError(.invalidInput, message: "the value does not encode as a JSON object: \(error)")
        }
    }

    static func decode(_ document: LocalDocument) throws -> SyncedDocument<Value> {
        let value: Value
        do {
            value = try (document.data as? Value) ?? TallyJSON.decoder().decode(Value.self, from: Data(document.data.bytes))
        } catch {
            throw ClientError(.invalidResponse, message: "\(document.key) does not decode as \(Value.self): \(error)")
        }
        return SyncedDocument(id: document.key.id, value: value, version: document.version, updatedAt: document.updatedAt,
                              isPending: document.pending)
    }
}
