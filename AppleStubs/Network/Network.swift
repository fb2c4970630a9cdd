// Stub of Apple's Network framework, for scripts/apple-typecheck only: the declarations the SDK uses, with the
// signatures Apple documents. Nothing here runs.
@_exported import Dispatch

/// https://developer.apple.com/documentation/network/nwpath
/// `final class NWPath` in Swift's overlay is a struct: `struct NWPath` (iOS 12, macOS 10.14), Sendable.
@available(iOS 12.0, macOS 10.14, tvOS 12.0, watchOS 6.0, *)
public struct NWPath: Sendable, Equatable, CustomDebugStringConvertible {
    /// https://developer.apple.com/documentation/network/nwpath/status-swift.enum
    public enum Status: Sendable, Equatable, Hashable {
        case satisfied
        case unsatisfied
        case requiresConnection
    }

    /// https://developer.apple.com/documentation/network/nwpath/status-swift.property
    public let status: NWPath.Status
    /// https://developer.apple.com/documentation/network/nwpath/isexpensive
    public let isExpensive: Bool
    /// https://developer.apple.com/documentation/network/nwpath/isconstrained (iOS 13)
    public let isConstrained: Bool
    public var debugDescription: String { fatalError("stub") }
}

/// https://developer.apple.com/documentation/network/nwpathmonitor
/// `final class NWPathMonitor` (iOS 12, macOS 10.14): `@unchecked Sendable` in the SDK.
@available(iOS 12.0, macOS 10.14, tvOS 12.0, watchOS 6.0, *)
public final class NWPathMonitor: @unchecked Sendable {
    /// https://developer.apple.com/documentation/network/nwpathmonitor/init()
    public init() {}
    /// https://developer.apple.com/documentation/network/nwpathmonitor/pathupdatehandler
    /// `final var pathUpdateHandler: (@Sendable (_ newPath: NWPath) -> Void)?`
    public var pathUpdateHandler: (@Sendable (_ newPath: NWPath) -> Void)?
    /// https://developer.apple.com/documentation/network/nwpathmonitor/currentpath
    public var currentPath: NWPath { fatalError("stub") }
    /// https://developer.apple.com/documentation/network/nwpathmonitor/start(queue:)
    public func start(queue: DispatchQueue) {}
    /// https://developer.apple.com/documentation/network/nwpathmonitor/cancel()
    public func cancel() {}
}
