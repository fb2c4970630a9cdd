// Stub of Apple's `os` module, for scripts/apple-typecheck only: the declarations the SDK uses, with the signatures
// Apple documents. Nothing here runs.

/// https://developer.apple.com/documentation/os/os_unfair_lock_s
/// `typedef struct os_unfair_lock_s { uint32_t _os_unfair_lock_opaque; } os_unfair_lock` (iOS 10, macOS 10.12).
public struct os_unfair_lock_s: Sendable {
    public var _os_unfair_lock_opaque: UInt32
    public init() { _os_unfair_lock_opaque = 0 }
    public init(_os_unfair_lock_opaque: UInt32) { self._os_unfair_lock_opaque = _os_unfair_lock_opaque }
}

/// https://developer.apple.com/documentation/os/os_unfair_lock
public typealias os_unfair_lock = os_unfair_lock_s

/// https://developer.apple.com/documentation/os/os_unfair_lock_t
public typealias os_unfair_lock_t = UnsafeMutablePointer<os_unfair_lock_s>

/// https://developer.apple.com/documentation/os/1646466-os_unfair_lock_lock
/// `void os_unfair_lock_lock(os_unfair_lock_t lock)`
public func os_unfair_lock_lock(_ lock: os_unfair_lock_t) {}

/// https://developer.apple.com/documentation/os/1646468-os_unfair_lock_unlock
/// `void os_unfair_lock_unlock(os_unfair_lock_t lock)`
public func os_unfair_lock_unlock(_ lock: os_unfair_lock_t) {}

/// https://developer.apple.com/documentation/os/1646467-os_unfair_lock_trylock
/// `bool os_unfair_lock_trylock(os_unfair_lock_t lock)`
public func os_unfair_lock_trylock(_ lock: os_unfair_lock_t) -> Bool { fatalError("stub") }
