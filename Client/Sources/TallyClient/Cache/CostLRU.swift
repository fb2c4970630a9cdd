/// A least-recently-used map bounded both by entry count and by total cost (for example bytes).
///
/// Every operation is O(1) (except the ones documented as O(n)) and, once the storage has grown to
/// its working size, allocates nothing: entries live in one array of nodes linked by indices,
/// freed slots are reused through a free list, and a dictionary maps keys to slots.
///
/// Not thread-safe: the owner guards it with its own lock.
public struct CostLRU<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// One slot: an entry when in use, a link in the free list otherwise (key and value cleared).
    @usableFromInline
    struct Node: Sendable {
        @usableFromInline var key: Key?
        @usableFromInline var value: Value?
        @usableFromInline var cost: Int
        @usableFromInline var prev: Int
        @usableFromInline var next: Int

        @inlinable
        init(key: Key?, value: Value?, cost: Int, prev: Int, next: Int) {
            self.key = key
            self.value = value
            self.cost = cost
            self.prev = prev
            self.next = next
        }
    }

    @inlinable static var none: Int { -1 }

    @usableFromInline var nodes: [Node] = []
    @usableFromInline var index: [Key: Int] = [:]
    /// Most recently used entry, or `none`.
    @usableFromInline var head = CostLRU.none
    /// Least recently used entry, or `none`.
    @usableFromInline var tail = CostLRU.none
    /// First free slot, chained through `next`, or `none`.
    @usableFromInline var free = CostLRU.none

    /// The most entries kept.
    public let countLimit: Int
    /// The largest total cost kept.
    public let costLimit: Int
    /// The sum of the costs of the entries kept.
    public var totalCost: Int { storedCost }
    @usableFromInline var storedCost = 0

    /// Creates an empty cache; both limits must be at least 1.
    @inlinable
    public init(countLimit: Int, costLimit: Int) {
        precondition(countLimit >= 1, "CostLRU countLimit must be >= 1")
        precondition(costLimit >= 1, "CostLRU costLimit must be >= 1")
        self.countLimit = countLimit
        self.costLimit = costLimit
    }

    /// The number of entries kept.
    @inlinable
    public var count: Int { index.count }

    /// Returns the value and marks it most recently used.
    @inlinable
    public mutating func value(forKey key: Key) -> Value? {
        guard let slot = index[key] else { return nil }
        moveToFront(slot)
        return nodes[slot].value
    }

    /// Returns the value without changing recency.
    @inlinable
    public func peek(_ key: Key) -> Value? {
        index[key].flatMap { nodes[$0].value }
    }

    /// Inserts or replaces (a replaced entry becomes most recent, with its new cost), then evicts
    /// least recently used entries until both limits hold. Returns what was evicted, oldest first.
    /// A value whose cost alone exceeds `costLimit` is not stored: it is returned in the evicted
    /// list (and any previous value under that key is removed and returned too).
    @inlinable
    @discardableResult
    public mutating func insert(_ value: Value, forKey key: Key, cost: Int) -> [(key: Key, value: Value)] {
        precondition(cost >= 0, "CostLRU cost must be >= 0")
        if cost > costLimit {
            var rejected: [(key: Key, value: Value)] = []
            if let old = removeValue(forKey: key) { rejected.append((key, old)) }
            rejected.append((key, value))
            return rejected
        }
        if let slot = index[key] {
            storedCost += cost - nodes[slot].cost
            nodes[slot].value = value
            nodes[slot].cost = cost
            moveToFront(slot)
        } else {
            let slot = allocate(Node(key: key, value: value, cost: cost, prev: Self.none, next: Self.none))
            index[key] = slot
            storedCost += cost
            linkAtFront(slot)
        }
        var evicted: [(key: Key, value: Value)] = []
        while index.count > countLimit || storedCost > costLimit {
            let (oldKey, oldValue) = release(tail)
            evicted.append((oldKey, oldValue))
        }
        return evicted
    }

    /// Removes the entry under `key` and returns its value, if there was one.
    @inlinable
    @discardableResult
    public mutating func removeValue(forKey key: Key) -> Value? {
        guard let slot = index[key] else { return nil }
        return release(slot).value
    }

    /// Removes every entry whose key satisfies `shouldRemove` (O(n)).
    @inlinable
    public mutating func removeAll(where shouldRemove: (Key) -> Bool) {
        var slot = head
        while slot != Self.none {
            let next = nodes[slot].next
            if let key = nodes[slot].key, shouldRemove(key) { _ = release(slot) }
            slot = next
        }
    }

    /// Removes every entry, keeping the storage for reuse.
    @inlinable
    public mutating func removeAll() {
        nodes.removeAll(keepingCapacity: true)
        index.removeAll(keepingCapacity: true)
        head = Self.none
        tail = Self.none
        free = Self.none
        storedCost = 0
    }

    /// Keys from most to least recently used (for tests and debugging; O(n)).
    @inlinable
    public var keysByRecency: [Key] {
        var keys: [Key] = []
        keys.reserveCapacity(index.count)
        var slot = head
        while slot != Self.none {
            if let key = nodes[slot].key { keys.append(key) }
            slot = nodes[slot].next
        }
        return keys
    }

    // MARK: Slots and links

    @inlinable
    mutating func allocate(_ node: Node) -> Int {
        if free != Self.none {
            let slot = free
            free = nodes[slot].next
            nodes[slot] = node
            return slot
        }
        nodes.append(node)
        return nodes.count - 1
    }

    /// Unlinks the entry in `slot`, drops it from the index and puts the slot on the free list.
    @inlinable
    mutating func release(_ slot: Int) -> (key: Key, value: Value) {
        unlink(slot)
        // Slots in use always hold a key and a value.
        let key = nodes[slot].key!
        let value = nodes[slot].value!
        index[key] = nil
        storedCost -= nodes[slot].cost
        nodes[slot] = Node(key: nil, value: nil, cost: 0, prev: Self.none, next: free)
        free = slot
        return (key, value)
    }

    @inlinable
    mutating func moveToFront(_ slot: Int) {
        guard slot != head else { return }
        unlink(slot)
        linkAtFront(slot)
    }

    @inlinable
    mutating func linkAtFront(_ slot: Int) {
        nodes[slot].prev = Self.none
        nodes[slot].next = head
        if head != Self.none { nodes[head].prev = slot }
        head = slot
        if tail == Self.none { tail = slot }
    }

    @inlinable
    mutating func unlink(_ slot: Int) {
        let prev = nodes[slot].prev
        let next = nodes[slot].next
        if prev != Self.none { nodes[prev].next = next } else { head = next }
        if next != Self.none { nodes[next].prev = prev } else { tail = prev }
        nodes[slot].prev = Self.none
        nodes[slot].next = Self.none
    }
}
