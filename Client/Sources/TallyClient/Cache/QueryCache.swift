import Foundation

/// The cache's engine, type-erased: confirmed values in a cost-bounded LRU, optimistic layers above
/// them, observers, and the ordering rules that keep late answers from overwriting newer state.
///
/// Rules (each one a complaint against TanStack Query or SWR that users still file):
/// - An optimistic change is a layer over the confirmed value; rollback removes the layer, so the value
///   shown afterwards is exactly what it would have been without the mutation.
/// - A fetch that was in flight when a mutation of its key started or settled is discarded: it may
///   predate the mutation and would resurrect an old value.
/// - While mutations of a key are in flight, their confirmations are held and applied together when the
///   last one settles, so a response that already includes a sibling's charge never meets that
///   sibling's estimate (no doubled deduction); ``Query/supersedes`` picks the newest among them.
/// - Clearing (sign-out) bumps a generation; anything started before is dropped when it returns. Keys of
///   data that belongs to no user (``Query/isUserData`` false: the price list) are kept.
/// - Observers are told changes only: each watcher remembers the ``Signature`` it last received, so a
///   notification that changes nothing it shows (a held confirmation, an invalidation of a stale key, the
///   same bytes confirmed again) is not sent. Values are never compared: confirmed bytes carry a revision.
@usableFromInline
final class QueryCache: Sendable {
    /// A value the server confirmed. `value` is decoded lazily for entries loaded from disk.
    struct Confirmed: Sendable {
        var value: (any Sendable)?
        var data: Data
        var etag: String?
        var confirmedAt: Date
        var fromDisk: Bool
        /// Set by the cache when stored: equal for equal bytes of one key, new for new bytes.
        var revision: UInt64 = 0
    }

    /// An optimistic change of one key by one mutation.
    struct Layer: Sendable {
        var mutation: UInt64
        var apply: @Sendable (any Sendable) -> any Sendable
        /// The mutation succeeded and its confirmation is held: the layer stays until the confirmation is applied.
        var settled = false
    }

    /// What an observer is told.
    @usableFromInline
    struct Snapshot: Sendable {
        @usableFromInline var value: (any Sendable)?
        @usableFromInline var isStale: Bool
        @usableFromInline var isFetching: Bool
        @usableFromInline var error: ClientError?
        @usableFromInline var confirmedAt: Date?
        @usableFromInline var pending: Int

        /// Its signature, given the revision of the confirmed bytes under its value (not a stored field: a larger
        /// snapshot makes the cache-hit read measurably slower).
        func signature(revision: UInt64) -> Signature {
            Signature(
                revision: revision, hasValue: value != nil, isStale: isStale, isFetching: isFetching, error: error,
                confirmedAt: confirmedAt, pending: pending)
        }
    }

    /// Everything an observer sees of a state except the value itself, which is identified by the revision of
    /// its confirmed bytes and the number of optimistic layers over them (every change of layers changes the
    /// count, and each change is notified on its own).
    struct Signature: Equatable, Sendable {
        var revision: UInt64
        var hasValue: Bool
        var isStale: Bool
        var isFetching: Bool
        var error: ClientError?
        var confirmedAt: Date?
        var pending: Int
    }

    /// Receives an observed key's states with their signatures.
    typealias WatcherFunction = @Sendable (Snapshot, Signature) -> Void

    /// One observer: where its states go, and the last one it was sent.
    private struct Watcher {
        var send: WatcherFunction
        var last: Signature
    }

    /// How a key's values are decoded, ordered and refetched; set by the first typed access.
    @usableFromInline
    struct Definition: Sendable {
        var staleAfter: TimeInterval
        /// The end of freshness a value states (`Query.freshUntil`), `nil` when the query has none.
        var freshUntil: (@Sendable (any Sendable) -> Date?)?
        var isUserData: Bool
        var decode: @Sendable (Data) throws -> any Sendable
        var supersedes: @Sendable (any Sendable, any Sendable) -> Bool

        @usableFromInline
        init(
            staleAfter: TimeInterval, freshUntil: (@Sendable (any Sendable) -> Date?)?, isUserData: Bool,
            decode: @escaping @Sendable (Data) throws -> any Sendable, supersedes: @escaping @Sendable (any Sendable, any Sendable) -> Bool
        ) {
            self.staleAfter = staleAfter
            self.freshUntil = freshUntil
            self.isUserData = isUserData
            self.decode = decode
            self.supersedes = supersedes
        }
    }

    /// Per-key bookkeeping that outlives LRU eviction while it matters.
    private struct Slot {
        var definition: Definition?
        var layers: [Layer] = []
        var inFlight = 0
        var epoch: UInt64 = 0
        var held: [Confirmed] = []
        var isFetching = false
        var error: ClientError?
        var invalidated = false
        var watchers: [UInt64: Watcher] = [:]
    }

    private struct State {
        var lru: CostLRU<String, Confirmed>
        var slots: [String: Slot] = [:]
        var nextId: UInt64 = 0
        var generation: UInt64 = 0
        /// Keys of data that belongs to no user: clearing keeps them.
        var sharedKeys: Set<String> = []
    }

    /// Identifies a fetch so its answer can be judged when it returns.
    struct FetchTicket: Sendable {
        var key: String
        var epoch: UInt64
        var generation: UInt64
        var etag: String?
    }

    /// Identifies a mutation's layers.
    struct MutationTicket: Sendable {
        var id: UInt64
        var keys: [String]
        var generation: UInt64
    }

    private let state: Locked<State>
    private let clock: any TallyClock

    init(countLimit: Int, costLimit: Int, clock: any TallyClock) {
        state = Locked(State(lru: CostLRU(countLimit: countLimit, costLimit: costLimit)))
        self.clock = clock
    }

    /// Per-entry bookkeeping added to the byte cost of each value.
    static let entryOverhead = 128

    // MARK: Reading

    /// Records how `key` is decoded and ordered; returns true the first time (later calls change nothing).
    @discardableResult
    func define(_ key: String, _ definition: @autoclosure () -> Definition) -> Bool {
        state.withLock { state in Self.define(key, definition, in: &state) }
    }

    private static func define(_ key: String, _ definition: () -> Definition, in state: inout State) -> Bool {
        if let i = state.slots.index(forKey: key), isDefined(&state.slots.values[i]) { return false }
        let made = definition()
        state.slots[key, default: Slot()].definition = made
        if !made.isUserData { state.sharedKeys.insert(key) }
        return true
    }

    /// The current state of `key`, defining it first if needed (one lock: the cache-hit fast path).
    @usableFromInline
    func snapshot(_ key: String, defining definition: @autoclosure () -> Definition) -> (snapshot: Snapshot, defined: Bool) {
        let now = clock.now
        return state.withLock { state in
            if let i = state.slots.index(forKey: key), Self.isDefined(&state.slots.values[i]) {
                return (Self.snapshot(key, in: &state, now: now, touch: true, slot: i), false)
            }
            let defined = Self.define(key, definition, in: &state)
            return (Self.snapshot(key, in: &state, now: now, touch: true), defined)
        }
    }

    /// The current state of `key`, marking it recently used.
    func snapshot(_ key: String) -> Snapshot {
        let now = clock.now
        return state.withLock { Self.snapshot(key, in: &$0, now: now, touch: true) }
    }

    /// The ETag of the confirmed value, for revalidation.
    func etag(_ key: String) -> String? { state.withLock { $0.lru.peek(key)?.etag } }

    /// Reads the slot in place: `Dictionary.Values`' getter would copy the whole `Slot` (retaining every
    /// array and closure in it), its `_modify` accessor does not. This is the cache-hit path.
    private static func snapshot(
        _ key: String, in state: inout State, now: Date, touch: Bool, slot: Dictionary<String, Slot>.Index? = nil
    ) -> Snapshot {
        var confirmed = touch ? state.lru.value(forKey: key) : state.lru.peek(key)
        guard let i = slot ?? state.slots.index(forKey: key) else {
            return Snapshot(
                value: confirmed?.value, isStale: true, isFetching: false, error: nil, confirmedAt: confirmed?.confirmedAt,
                pending: 0)
        }
        if var entry = confirmed, entry.value == nil, let decode = state.slots.values[i].definition?.decode {
            entry.value = try? decode(entry.data)
            if entry.value != nil {
                state.lru.insert(entry, forKey: key, cost: entry.data.count + entryOverhead)
                confirmed = entry
            }
        }
        return read(&state.slots.values[i], confirmed, now: now)
    }

    private static func read(_ slot: inout Slot, _ confirmed: Confirmed?, now: Date) -> Snapshot {
        var value = confirmed?.value
        if !slot.layers.isEmpty, let base = value {
            value = slot.layers.reduce(base) { $1.apply($0) }
        }
        let staleAfter = slot.definition?.staleAfter ?? 0
        var isStale = confirmed.map { $0.fromDisk || now.timeIntervalSince($0.confirmedAt) >= staleAfter } ?? true
        if !isStale, let freshUntil = slot.definition?.freshUntil, let base = confirmed?.value, let end = freshUntil(base), now >= end {
            isStale = true
        }
        return Snapshot(
            value: value, isStale: isStale || slot.invalidated, isFetching: slot.isFetching, error: slot.error,
            confirmedAt: confirmed?.confirmedAt, pending: slot.layers.count)
    }

    private static func isDefined(_ slot: inout Slot) -> Bool { slot.definition != nil }

    /// Tells `key`'s observers its state if it differs from the last one each was sent; `current` is that
    /// state when the caller already has it.
    private static func notify(_ key: String, in state: inout State, now: Date, current: Snapshot? = nil) {
        guard let i = state.slots.index(forKey: key), !state.slots.values[i].watchers.isEmpty else { return }
        let snapshot = current ?? snapshot(key, in: &state, now: now, touch: false, slot: i)
        let signature = snapshot.signature(revision: state.lru.peek(key)?.revision ?? 0)
        // Yielding inside the lock keeps every observer's sequence in the order the changes happened. Walked by
        // index and written in place: iterating `indices` would retain the storage and copy it on the first write.
        var w = state.slots.values[i].watchers.startIndex
        while w != state.slots.values[i].watchers.endIndex {
            if state.slots.values[i].watchers.values[w].last != signature {
                state.slots.values[i].watchers.values[w].last = signature
                state.slots.values[i].watchers.values[w].send(snapshot, signature)
            }
            state.slots.values[i].watchers.formIndex(after: &w)
        }
    }

    /// Stores `confirmed` as `key`'s confirmed value. The same bytes as the current ones keep its revision
    /// (observers see no new value); other bytes get a new one.
    private static func store(_ confirmed: Confirmed, _ key: String, in state: inout State) {
        var confirmed = confirmed
        if let current = state.lru.peek(key), current.data == confirmed.data {
            confirmed.revision = current.revision
        } else {
            state.nextId += 1
            confirmed.revision = state.nextId
        }
        state.lru.insert(confirmed, forKey: key, cost: confirmed.data.count + entryOverhead)
    }

    // MARK: Observing

    /// The current state of `key` with its signature (for a first state that later ones are compared with).
    func signedSnapshot(_ key: String) -> (snapshot: Snapshot, signature: Signature) {
        let now = clock.now
        return state.withLock { state in
            let snapshot = Self.snapshot(key, in: &state, now: now, touch: true)
            return (snapshot, snapshot.signature(revision: state.lru.peek(key)?.revision ?? 0))
        }
    }

    /// Registers `watcher` and sends it the current state; returns the id for ``unwatch(_:id:)``.
    func watch(_ key: String, _ watcher: @escaping WatcherFunction) -> UInt64 {
        let now = clock.now
        return state.withLock { state in
            state.nextId += 1
            let snapshot = Self.snapshot(key, in: &state, now: now, touch: true)
            let signature = snapshot.signature(revision: state.lru.peek(key)?.revision ?? 0)
            state.slots[key, default: Slot()].watchers[state.nextId] = Watcher(send: watcher, last: signature)
            watcher(snapshot, signature)
            return state.nextId
        }
    }

    func unwatch(_ key: String, id: UInt64) {
        state.withLock { state in
            state.slots[key]?.watchers[id] = nil
            Self.dropIfIdle(key, in: &state)
        }
    }

    /// Keys that have observers.
    var watchedKeys: [String] { state.withLock { $0.slots.filter { !$0.value.watchers.isEmpty }.map(\.key) } }

    private static func dropIfIdle(_ key: String, in state: inout State) {
        guard let slot = state.slots[key] else { return }
        if slot.watchers.isEmpty && slot.layers.isEmpty && slot.inFlight == 0 && !slot.isFetching && slot.held.isEmpty
            && !slot.invalidated && slot.error == nil && state.lru.peek(key) == nil
        {
            state.slots[key] = nil
        }
    }

    // MARK: Fetching

    /// Marks `key` as fetching and returns the ticket its answer is judged by.
    func beginFetch(_ key: String) -> FetchTicket {
        let now = clock.now
        return state.withLock { state in
            state.slots[key, default: Slot()].isFetching = true
            let ticket = FetchTicket(
                key: key, epoch: state.slots[key]!.epoch, generation: state.generation, etag: state.lru.peek(key)?.etag)
            Self.notify(key, in: &state, now: now)
            return ticket
        }
    }

    /// How a fetch ended.
    enum FetchResult: Sendable {
        case value(Confirmed)
        case notModified
        case failed(ClientError)
        /// Cancelled: it leaves the key's value and error as they were.
        case abandoned
    }

    /// What a fetch left behind.
    struct FetchOutcome: Sendable {
        /// The entry stored, to persist; nil when the answer was discarded or the fetch failed.
        var stored: Confirmed?
        /// The value to show for the key right after (optimistic layers included), read in the same lock,
        /// so every caller sharing the fetch can be handed it without reading the cache again.
        var value: (any Sendable)?
    }

    /// Applies a fetch's answer if it is still current, and returns what to persist and show.
    @discardableResult
    func finishFetch(_ ticket: FetchTicket, _ result: FetchResult) -> FetchOutcome {
        let now = clock.now
        return state.withLock { state -> FetchOutcome in
            guard state.generation == ticket.generation || state.sharedKeys.contains(ticket.key) else {
                return FetchOutcome(stored: nil, value: Self.snapshot(ticket.key, in: &state, now: now, touch: true).value)
            }
            var slot = state.slots[ticket.key, default: Slot()]
            slot.isFetching = false
            var stored: Confirmed?
            let current = slot.inFlight == 0 && slot.epoch == ticket.epoch
            switch result {
            case .value(let confirmed):
                slot.error = nil
                if current, Self.accepts(confirmed, over: state.lru.peek(ticket.key), slot.definition) {
                    Self.store(confirmed, ticket.key, in: &state)
                    slot.invalidated = false
                    stored = confirmed
                }
            case .notModified:
                slot.error = nil
                if current, var entry = state.lru.peek(ticket.key), entry.etag == ticket.etag {
                    entry.confirmedAt = now
                    entry.fromDisk = false
                    Self.store(entry, ticket.key, in: &state)
                    slot.invalidated = false
                    stored = entry
                }
            case .failed(let error):
                slot.error = error
            case .abandoned:
                break
            }
            state.slots[ticket.key] = slot
            let shown = Self.snapshot(ticket.key, in: &state, now: now, touch: true)
            Self.notify(ticket.key, in: &state, now: now, current: shown)
            Self.dropIfIdle(ticket.key, in: &state)
            return FetchOutcome(stored: stored, value: shown.value)
        }
    }

    private static func accepts(_ new: Confirmed, over current: Confirmed?, _ definition: Definition?) -> Bool {
        guard let current, let old = current.value, let candidate = new.value, let definition else { return true }
        return definition.supersedes(candidate, old)
    }

    // MARK: Mutating

    /// Applies a mutation's optimistic layers at once and notifies observers.
    func beginMutation(_ layers: [(key: String, apply: @Sendable (any Sendable) -> any Sendable)]) -> MutationTicket {
        let now = clock.now
        return state.withLock { state in
            state.nextId += 1
            let id = state.nextId
            var keys: [String] = []
            for layer in layers where !keys.contains(layer.key) { keys.append(layer.key) }
            for (key, apply) in layers {
                state.slots[key, default: Slot()].layers.append(Layer(mutation: id, apply: apply))
            }
            for key in keys {
                state.slots[key]!.inFlight += 1
                state.slots[key]!.epoch += 1
                Self.notify(key, in: &state, now: now)
            }
            return MutationTicket(id: id, keys: keys, generation: state.generation)
        }
    }

    /// Settles a mutation. A failure removes its layers at once (exact rollback). A success keeps its
    /// layers until its confirmations are applied, which happens when the key's last in-flight mutation
    /// settles, so neither a lost nor a doubled deduction is ever shown. Returns the entries stored (to persist).
    func settleMutation(
        _ ticket: MutationTicket, succeeded: Bool, confirmations: [(key: String, value: Confirmed)]
    ) -> [(key: String, value: Confirmed)] {
        let now = clock.now
        return state.withLock { state in
            guard state.generation == ticket.generation else { return [] }
            var stored: [(key: String, value: Confirmed)] = []
            let keys = ticket.keys + confirmations.map(\.key).filter { !ticket.keys.contains($0) }
            for key in keys {
                var slot = state.slots[key, default: Slot()]
                let confirmed = confirmations.filter { $0.key == key }.map(\.value)
                if ticket.keys.contains(key) {
                    slot.inFlight -= 1
                    if succeeded && !confirmed.isEmpty {
                        for index in slot.layers.indices where slot.layers[index].mutation == ticket.id { slot.layers[index].settled = true }
                    } else {
                        slot.layers.removeAll { $0.mutation == ticket.id }
                        // Done on the server but not confirmed here: refetch rather than show the old value as fresh.
                        if succeeded { slot.invalidated = true }
                    }
                }
                slot.epoch += 1
                slot.held.append(contentsOf: confirmed)
                // The server just answered for this key: an earlier fetch's failure no longer describes it.
                if !confirmed.isEmpty { slot.error = nil }
                if slot.inFlight == 0 {
                    slot.layers.removeAll(where: \.settled)
                    var best = state.lru.peek(key)
                    var changed = false
                    for candidate in slot.held where Self.accepts(candidate, over: best, slot.definition) {
                        best = candidate
                        changed = true
                    }
                    slot.held = []
                    if changed, let best {
                        Self.store(best, key, in: &state)
                        slot.invalidated = false
                        stored.append((key, best))
                    }
                }
                state.slots[key] = slot
                Self.notify(key, in: &state, now: now)
                Self.dropIfIdle(key, in: &state)
            }
            return stored
        }
    }

    // MARK: Invalidation and clearing

    /// Marks matching keys stale; returns those with observers (the caller refetches them).
    func invalidate(where matches: (String) -> Bool) -> [String] {
        let now = clock.now
        return state.withLock { state in
            let keys = Set(state.slots.keys.filter(matches)).union(state.lru.keysByRecency.filter(matches))
            var watched: [String] = []
            for key in keys {
                state.slots[key, default: Slot()].invalidated = true
                if !(state.slots[key]?.watchers.isEmpty ?? true) { watched.append(key) }
                Self.notify(key, in: &state, now: now)
            }
            return watched
        }
    }

    /// Forgets every value, layer and pending answer of the user (sign-out, user switch). Observers stay and
    /// see empty states. Data that belongs to no user keeps its value, freshness and fetch in flight.
    func clear() {
        let now = clock.now
        state.withLock { state in
            state.generation += 1
            let shared = state.sharedKeys
            state.lru.removeAll(where: { !shared.contains($0) })
            for key in Array(state.slots.keys) {
                let old = state.slots[key]!
                var slot: Slot
                if shared.contains(key) {
                    slot = old
                    (slot.layers, slot.inFlight, slot.held) = ([], 0, [])
                } else {
                    slot = Slot()
                    slot.definition = old.definition
                    slot.watchers = old.watchers
                }
                state.slots[key] = slot.watchers.isEmpty && !shared.contains(key) ? nil : slot
                Self.notify(key, in: &state, now: now)
            }
        }
    }

    /// Loads values kept on disk (shown as stale until revalidated); never replaces a value already in memory.
    /// `shared`: they belong to no user (clearing keeps them).
    func load(_ entries: [PersistedEntry], shared: Bool = false) {
        let now = clock.now
        state.withLock { state in
            for entry in entries {
                if shared { state.sharedKeys.insert(entry.key) }
                guard state.lru.peek(entry.key) == nil else { continue }
                let confirmed = Confirmed(value: nil, data: entry.data, etag: entry.etag, confirmedAt: entry.confirmedAt, fromDisk: true)
                Self.store(confirmed, entry.key, in: &state)
                Self.notify(entry.key, in: &state, now: now)
            }
        }
    }

    /// Writes `confirmed` as `key`'s confirmed value, as a server answer would, but unconditionally (the app's
    /// word, not an answer to order): it clears the error and the invalidation, discards a fetch already in
    /// flight (its answer may predate the write), and stays under the layers of mutations in flight, whose
    /// confirmations are judged against it by ``Query/supersedes`` when they settle.
    func set(_ key: String, _ confirmed: Confirmed) {
        let now = clock.now
        state.withLock { state in
            state.slots[key, default: Slot()].epoch += 1
            state.slots[key]!.error = nil
            state.slots[key]!.invalidated = false
            Self.store(confirmed, key, in: &state)
            Self.notify(key, in: &state, now: now)
        }
    }

    /// How many times the cache was cleared: tickets carry the one they were made in.
    var generation: UInt64 { state.withLock { $0.generation } }

    /// Number of values held and their total cost, for tests and metrics.
    var usage: (count: Int, cost: Int) { state.withLock { ($0.lru.count, $0.lru.totalCost) } }
}
