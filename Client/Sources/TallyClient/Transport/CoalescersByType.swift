
/// One ``Coalescer`` per value type, so that a shared result reaches each caller as its own type. A value
/// such as a `Wallet` then travels to every follower as plain bytes; as `any Sendable` it would sit in one
/// heap box whose reference count all followers would retain and release at once, from every core (perf:
/// one of the largest costs of the SDK's own part of a 1,000-caller fan-out).
final class CoalescersByType<Key: Hashable & Sendable>: Sendable {
    private let coalescers = Locked<[ObjectIdentifier: any WaiterCounting<Key>]>([:])

    /// Creates an empty family.
    init() {}

    /// The coalescer for values of type `Value`, made on first use.
    func callers<Value: Sendable>(of type: Value.Type) -> Coalescer<Key, Value> {
        coalescers.withLock { all in
            if let existing = all[ObjectIdentifier(type)] {
                // Stored under its own value type's identifier only, just below.
                return existing as! Coalescer<Key, Value>
            }
            let made = Coalescer<Key, Value>()
            all[ObjectIdentifier(type)] = made
            return made
        }
    }

    /// How many callers wait for `key`, whatever its value type (tests use it to know every caller has joined).
    func waiterCount(for key: Key) -> Int {
        coalescers.withLock { all in all.values.reduce(0) { $0 + $1.waiterCount(for: key) } }
    }
}

/// A coalescer seen without its value type.
protocol WaiterCounting<Key>: Sendable {
    associatedtype Key
    /// How many callers wait for `key`.
    func waiterCount(for key: Key) -> Int
}

extension Coalescer: WaiterCounting {}
