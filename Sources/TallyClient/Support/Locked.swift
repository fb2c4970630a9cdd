import Synchronization

/// A `Mutex` in a class, so closures can share it (a `Mutex` itself cannot be captured).
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) { mutex = Mutex(value) }

    func withLock<T>(_ body: (inout sending Value) throws -> sending T) rethrows -> sending T { try mutex.withLock(body) }
}
