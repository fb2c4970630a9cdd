// Stub of Apple's DeviceCheck (App Attest and the per-device bits), for scripts/apple-typecheck only: the declarations
// the SDK uses, with the signatures, Sendable closures and availability Apple documents. Nothing here runs.
@_exported import Foundation

/// https://developer.apple.com/documentation/devicecheck/dcappattestservice
/// `class DCAppAttestService: NSObject` (iOS 14, macOS 11, tvOS 15, watchOS 9). Not declared Sendable.
@available(iOS 14.0, macOS 11.0, tvOS 15.0, watchOS 9.0, *)
open class DCAppAttestService: NSObject {
    /// https://developer.apple.com/documentation/devicecheck/dcappattestservice/shared
    /// `class var shared: DCAppAttestService { get }`
    open class var shared: DCAppAttestService { fatalError("stub") }

    /// https://developer.apple.com/documentation/devicecheck/dcappattestservice/issupported
    /// `var isSupported: Bool { get }`
    open var isSupported: Bool { fatalError("stub") }

    /// https://developer.apple.com/documentation/devicecheck/dcappattestservice/generatekey(completionhandler:)
    open func generateKey(completionHandler: @escaping @Sendable (String?, (any Error)?) -> Void) { fatalError("stub") }
    /// The same page's concurrency note: `func generateKey() async throws -> String`.
    open func generateKey() async throws -> String { fatalError("stub") }

    /// https://developer.apple.com/documentation/devicecheck/dcappattestservice/attestkey(_:clientdatahash:completionhandler:)
    open func attestKey(
        _ keyId: String, clientDataHash: Data, completionHandler: @escaping @Sendable (Data?, (any Error)?) -> Void
    ) { fatalError("stub") }
    /// The same page's concurrency note: `func attestKey(_ keyId: String, clientDataHash: Data) async throws -> Data`.
    open func attestKey(_ keyId: String, clientDataHash: Data) async throws -> Data { fatalError("stub") }

    /// https://developer.apple.com/documentation/devicecheck/dcappattestservice/generateassertion(_:clientdatahash:completionhandler:)
    open func generateAssertion(
        _ keyId: String, clientDataHash: Data, completionHandler: @escaping @Sendable (Data?, (any Error)?) -> Void
    ) { fatalError("stub") }
    /// The same page's concurrency note:
    /// `func generateAssertion(_ keyId: String, clientDataHash: Data) async throws -> Data`.
    open func generateAssertion(_ keyId: String, clientDataHash: Data) async throws -> Data { fatalError("stub") }
}

/// https://developer.apple.com/documentation/devicecheck/dcdevice
/// `class DCDevice: NSObject` (iOS 11, macOS 10.15, tvOS 11, watchOS 9). Not declared Sendable.
@available(iOS 11.0, macOS 10.15, tvOS 11.0, watchOS 9.0, *)
open class DCDevice: NSObject {
    /// https://developer.apple.com/documentation/devicecheck/dcdevice/current
    /// `class var current: DCDevice { get }`
    open class var current: DCDevice { fatalError("stub") }

    /// https://developer.apple.com/documentation/devicecheck/dcdevice/issupported
    /// `var isSupported: Bool { get }`
    open var isSupported: Bool { fatalError("stub") }

    /// https://developer.apple.com/documentation/devicecheck/dcdevice/generatetoken(completionhandler:)
    open func generateToken(completionHandler completion: @escaping @Sendable (Data?, (any Error)?) -> Void) { fatalError("stub") }
    /// The same page's concurrency note: `func generateToken() async throws -> Data`.
    open func generateToken() async throws -> Data { fatalError("stub") }
}

/// https://developer.apple.com/documentation/devicecheck/dcerrordomain
/// `let DCErrorDomain: String`
@available(iOS 11.0, macOS 10.15, tvOS 11.0, watchOS 9.0, *)
public let DCErrorDomain: String = "com.apple.devicecheck.error"

/// https://developer.apple.com/documentation/devicecheck/dcerror-swift.struct
/// `struct DCError`: the bridged error of `DCErrorDomain` (an `NSError` of that domain casts to it with `as? DCError`).
@available(iOS 11.0, macOS 10.15, tvOS 11.0, watchOS 9.0, *)
public struct DCError: Error, Hashable, Sendable {
    /// https://developer.apple.com/documentation/devicecheck/dcerror-swift.struct/code
    /// `enum Code: Int` (`DCErrorCode` in Objective-C: unknownSystemFailure 0 … serverUnavailable 4).
    public enum Code: Int, Hashable, Sendable {
        /// https://developer.apple.com/documentation/devicecheck/dcerror-swift.struct/code/unknownsystemfailure
        case unknownSystemFailure = 0
        /// https://developer.apple.com/documentation/devicecheck/dcerror-swift.struct/code/featureunsupported
        case featureUnsupported = 1
        /// https://developer.apple.com/documentation/devicecheck/dcerror-swift.struct/code/invalidinput
        case invalidInput = 2
        /// https://developer.apple.com/documentation/devicecheck/dcerror-swift.struct/code/invalidkey
        case invalidKey = 3
        /// https://developer.apple.com/documentation/devicecheck/dcerror-swift.struct/code/serverunavailable
        case serverUnavailable = 4
    }

    /// The error's code (`_BridgedStoredNSError.code`).
    public let code: Code

    /// https://developer.apple.com/documentation/devicecheck/dcerror-swift.struct/errordomain
    /// `static var errorDomain: String { get }`
    public static var errorDomain: String { DCErrorDomain }
    /// https://developer.apple.com/documentation/devicecheck/dcerror-swift.struct/unknownsystemfailure
    public static var unknownSystemFailure: DCError.Code { .unknownSystemFailure }
    /// https://developer.apple.com/documentation/devicecheck/dcerror-swift.struct/featureunsupported
    public static var featureUnsupported: DCError.Code { .featureUnsupported }
    /// https://developer.apple.com/documentation/devicecheck/dcerror-swift.struct/invalidinput
    public static var invalidInput: DCError.Code { .invalidInput }
    /// https://developer.apple.com/documentation/devicecheck/dcerror-swift.struct/invalidkey
    public static var invalidKey: DCError.Code { .invalidKey }
    /// https://developer.apple.com/documentation/devicecheck/dcerror-swift.struct/serverunavailable
    public static var serverUnavailable: DCError.Code { .serverUnavailable }
}
