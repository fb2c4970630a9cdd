#if canImport(os)
import os
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A value behind a lock: `Synchronization.Mutex` for the OS versions apps still ship to (iOS 15, macOS 12).
///
/// Copies share one value and one lock, so closures can capture it. The value and the lock live in one
/// allocation (`os_unfair_lock` on Apple platforms, `pthread_mutex_t` elsewhere), as in NIO's `NIOLockedValueBox`.
struct Locked<Value> {
    private let buffer: LockedBuffer<Value>

    /// Wraps `value`.
    init(_ value: Value) {
        buffer = LockedBuffer.make(value)
    }

    /// Runs `body` with exclusive access to the value.
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        try buffer.withUnsafeMutablePointers { value, lock in
            LockPrimitive.lock(lock)
            defer { LockPrimitive.unlock(lock) }
            return try body(&value.pointee)
        }
    }
}

/// Shared across threads only when its value may be: the lock makes access exclusive, not the value sendable.
extension Locked: @unchecked Sendable where Value: Sendable {}

/// The value (header) and its lock (the single element) of a ``Locked``.
final class LockedBuffer<Value>: ManagedBuffer<Value, LockPrimitive.Lock> {
    static func make(_ value: Value) -> LockedBuffer<Value> {
        let buffer = create(minimumCapacity: 1) { _ in value }
        buffer.withUnsafeMutablePointerToElements { LockPrimitive.initialize($0) }
        return unsafeDowncast(buffer, to: LockedBuffer<Value>.self)
    }

    deinit {
        withUnsafeMutablePointerToElements { LockPrimitive.destroy($0) }
    }
}

/// The platform's lock: initialized in place, never moved.
enum LockPrimitive {
    #if canImport(os)
    typealias Lock = os_unfair_lock

    static func initialize(_ lock: UnsafeMutablePointer<Lock>) { lock.initialize(to: os_unfair_lock()) }
    static func destroy(_ lock: UnsafeMutablePointer<Lock>) { lock.deinitialize(count: 1) }
    static func lock(_ lock: UnsafeMutablePointer<Lock>) { os_unfair_lock_lock(lock) }
    static func unlock(_ lock: UnsafeMutablePointer<Lock>) { os_unfair_lock_unlock(lock) }
    #else
    typealias Lock = pthread_mutex_t

    static func initialize(_ lock: UnsafeMutablePointer<Lock>) {
        lock.initialize(to: pthread_mutex_t())
        let result = pthread_mutex_init(lock, nil)
        precondition(result == 0, "pthread_mutex_init failed: \(result)")
    }

    static func destroy(_ lock: UnsafeMutablePointer<Lock>) {
        pthread_mutex_destroy(lock)
        lock.deinitialize(count: 1)
    }

    static func lock(_ lock: UnsafeMutablePointer<Lock>) {
        let result = pthread_mutex_lock(lock)
        precondition(result == 0, "pthread_mutex_lock failed: \(result)")
    }

    static func unlock(_ lock: UnsafeMutablePointer<Lock>) {
        let result = pthread_mutex_unlock(lock)
        precondition(result == 0, "pthread_mutex_unlock failed: \(result)")
    }
    #endif
}
