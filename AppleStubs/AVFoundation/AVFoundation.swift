// Stub of Apple's AVFoundation, for scripts/apple-typecheck only: the declarations the SDK uses, with the signatures,
// isolation and Sendable conformances Apple documents. Nothing here runs. `import AVFoundation` re-exports Foundation,
// Core Media (CMTime) and Core Graphics (CGImage, CGSize, CGAffineTransform), as Apple's module does.
@_exported import CoreGraphics
@_exported import CoreMedia
@_exported import Foundation

// MARK: - Loading properties asynchronously

/// https://developer.apple.com/documentation/avfoundation/avasynchronouskeyvalueloading
/// `protocol AVAsynchronousKeyValueLoading` (AVAsset and AVAssetTrack adopt it).
public protocol AVAsynchronousKeyValueLoading {}

/// https://developer.apple.com/documentation/avfoundation/avanyasyncproperty
/// `class AVAnyAsyncProperty` (iOS 15): Sendable.
@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
public class AVAnyAsyncProperty: CustomStringConvertible, @unchecked Sendable {
    init() {}
    public var description: String { fatalError("stub") }
}

/// https://developer.apple.com/documentation/avfoundation/avpartialasyncproperty
/// `class AVPartialAsyncProperty<Root>`: the class the property keys (`.duration`, `.naturalSize`, …) are declared on,
/// each in an extension constrained to its root (`where Root: AVAsset`, `where Root: AVAssetTrack`).
@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
public class AVPartialAsyncProperty<Root>: AVAnyAsyncProperty, @unchecked Sendable {}

/// https://developer.apple.com/documentation/avfoundation/avasyncproperty
/// `class AVAsyncProperty<Root, Value>`: a key whose loaded value is a `Value`.
@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
public class AVAsyncProperty<Root, Value>: AVPartialAsyncProperty<Root>, @unchecked Sendable {}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
extension AVAsynchronousKeyValueLoading {
    /// https://developer.apple.com/documentation/avfoundation/avasynchronouskeyvalueloading/load(_:isolation:)
    /// iOS 18 SDK (Xcode 16): `func load<T>(_ property: AVAsyncProperty<Self, T>) async throws -> T`, nonisolated.
    /// Apple's page now shows Xcode 26's `load<T>(_:isolation: isolated (any Actor)? = #isolation)`, back-deployed
    /// (`@backDeployed(before: iOS 26.0, …)`); the stub keeps Xcode 16's nonisolated form, the stricter of the two
    /// (a non-Sendable `Self` cannot be sent off an actor to it), so a call it accepts compiles with either SDK.
    public func load<T>(_ property: AVAsyncProperty<Self, T>) async throws -> T { fatalError("stub") }

    /// https://developer.apple.com/documentation/avfoundation/avasynchronouskeyvalueloading/load(_:_:_:isolation:)
    /// Two or more keys at once, their values as a tuple: Xcode 26's
    /// `func load<A, B, each C>(_ firstProperty: AVAsyncProperty<Self, A>, _ secondProperty: AVAsyncProperty<Self, B>,
    ///     _ properties: repeat AVAsyncProperty<Self, each C>, isolation: isolated (any Actor)? = #isolation)
    ///     async throws -> (A, B, repeat each C)`
    /// without `isolation:`, as above (Xcode 16 declares the same as overloads of two to eight keys).
    public func load<A, B, each C>(
        _ firstProperty: AVAsyncProperty<Self, A>, _ secondProperty: AVAsyncProperty<Self, B>,
        _ properties: repeat AVAsyncProperty<Self, each C>
    ) async throws -> (A, B, repeat each C) { fatalError("stub") }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
extension AVPartialAsyncProperty where Root: AVAsset {
    /// https://developer.apple.com/documentation/avfoundation/avpartialasyncproperty/duration
    /// `static var duration: AVAsyncProperty<Root, CMTime> { get }`
    public static var duration: AVAsyncProperty<Root, CMTime> { fatalError("stub") }
    /// https://developer.apple.com/documentation/avfoundation/avpartialasyncproperty/tracks-48zyw
    /// `static var tracks: AVAsyncProperty<Root, [AVAssetTrack]> { get }`
    public static var tracks: AVAsyncProperty<Root, [AVAssetTrack]> { fatalError("stub") }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
extension AVPartialAsyncProperty where Root: AVAssetTrack {
    /// https://developer.apple.com/documentation/avfoundation/avpartialasyncproperty/naturalsize
    /// `static var naturalSize: AVAsyncProperty<Root, CGSize> { get }`
    public static var naturalSize: AVAsyncProperty<Root, CGSize> { fatalError("stub") }
    /// https://developer.apple.com/documentation/avfoundation/avpartialasyncproperty/preferredtransform-90jdn
    /// `static var preferredTransform: AVAsyncProperty<Root, CGAffineTransform> { get }`
    public static var preferredTransform: AVAsyncProperty<Root, CGAffineTransform> { fatalError("stub") }
}

// MARK: - Assets and tracks

/// https://developer.apple.com/documentation/avfoundation/avmediatype
/// `struct AVMediaType: Hashable, Equatable, RawRepresentable` (a typed NSString constant): Sendable.
public struct AVMediaType: Hashable, RawRepresentable, Sendable {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    /// https://developer.apple.com/documentation/avfoundation/avmediatype/video
    /// `static let video: AVMediaType`
    public static let video = AVMediaType(rawValue: "vide")
    /// https://developer.apple.com/documentation/avfoundation/avmediatype/audio
    /// `static let audio: AVMediaType`
    public static let audio = AVMediaType(rawValue: "soun")
}

/// https://developer.apple.com/documentation/avfoundation/avasset
/// `class AVAsset: NSObject, NSCopying, AVAsynchronousKeyValueLoading`. Not Sendable itself (its mutable
/// subclasses, AVMutableComposition and AVMutableMovie, are not; AVPlayerItem takes `any AVAsset & Sendable`).
open class AVAsset: NSObject, NSCopying, AVAsynchronousKeyValueLoading {
    open func copy(with zone: NSZone?) -> Any { fatalError("stub") }

    /// https://developer.apple.com/documentation/avfoundation/avasset/loadtracks(withmediatype:completionhandler:)
    /// `func loadTracks(withMediaType mediaType: AVMediaType) async throws -> [AVAssetTrack]` (iOS 15; the async
    /// form of `loadTracks(withMediaType:completionHandler:)`).
    @available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
    open func loadTracks(withMediaType mediaType: AVMediaType) async throws -> [AVAssetTrack] { fatalError("stub") }
}

/// https://developer.apple.com/documentation/avfoundation/avurlasset
/// `class AVURLAsset: AVAsset`: immutable, and Sendable in the SDK.
open class AVURLAsset: AVAsset, @unchecked Sendable {
    /// https://developer.apple.com/documentation/avfoundation/avurlasset/init(url:options:)-2x8uu
    /// `init(url URL: URL, options: [String : Any]? = nil)`
    public init(url URL: URL, options: [String: Any]? = nil) { fatalError("stub") }

    /// https://developer.apple.com/documentation/avfoundation/avurlasset/url
    /// `var url: URL { get }`
    open var url: URL { fatalError("stub") }
}

/// https://developer.apple.com/documentation/avfoundation/avassettrack
/// `class AVAssetTrack: NSObject, NSCopying, AVAsynchronousKeyValueLoading`. Not Sendable in the iOS 18 SDK (Apple's
/// current page lists Sendable; the stub keeps the stricter).
open class AVAssetTrack: NSObject, NSCopying, AVAsynchronousKeyValueLoading {
    open func copy(with zone: NSZone?) -> Any { fatalError("stub") }
}

// MARK: - Frames of a video

/// https://developer.apple.com/documentation/avfoundation/avassetimagegenerator
/// `class AVAssetImageGenerator: NSObject` (not on watchOS): mutable configuration, not Sendable.
@available(watchOS, unavailable)
open class AVAssetImageGenerator: NSObject {
    /// https://developer.apple.com/documentation/avfoundation/avassetimagegenerator/init(asset:)
    /// `init(asset: AVAsset)`
    public init(asset: AVAsset) { fatalError("stub") }

    /// https://developer.apple.com/documentation/avfoundation/avassetimagegenerator/asset
    /// `var asset: AVAsset { get }`
    open var asset: AVAsset { fatalError("stub") }
    /// https://developer.apple.com/documentation/avfoundation/avassetimagegenerator/appliespreferredtracktransform
    /// `var appliesPreferredTrackTransform: Bool { get set }`
    open var appliesPreferredTrackTransform: Bool { get { fatalError("stub") } set {} }
    /// https://developer.apple.com/documentation/avfoundation/avassetimagegenerator/maximumsize
    /// `var maximumSize: CGSize { get set }` (`.zero`: the asset's unscaled dimensions).
    open var maximumSize: CGSize { get { fatalError("stub") } set {} }
    /// https://developer.apple.com/documentation/avfoundation/avassetimagegenerator/requestedtimetolerancebefore
    /// `var requestedTimeToleranceBefore: CMTime { get set }`
    open var requestedTimeToleranceBefore: CMTime { get { fatalError("stub") } set {} }
    /// https://developer.apple.com/documentation/avfoundation/avassetimagegenerator/requestedtimetoleranceafter
    /// `var requestedTimeToleranceAfter: CMTime { get set }`
    open var requestedTimeToleranceAfter: CMTime { get { fatalError("stub") } set {} }

    /// https://developer.apple.com/documentation/avfoundation/avassetimagegenerator/copycgimage(at:actualtime:)
    /// `func copyCGImage(at requestedTime: CMTime, actualTime: UnsafeMutablePointer<CMTime>?) throws -> CGImage`
    /// (synchronous; deprecated in iOS 18, macOS 15, tvOS 18, visionOS 2).
    @available(iOS, introduced: 4.0, deprecated: 18.0)
    @available(macOS, introduced: 10.7, deprecated: 15.0)
    @available(tvOS, introduced: 9.0, deprecated: 18.0)
    @available(visionOS, introduced: 1.0, deprecated: 2.0)
    open func copyCGImage(at requestedTime: CMTime, actualTime: UnsafeMutablePointer<CMTime>?) throws -> CGImage {
        fatalError("stub")
    }
}

@available(watchOS, unavailable)
extension AVAssetImageGenerator {
    /// https://developer.apple.com/documentation/avfoundation/avassetimagegenerator/image(at:)
    /// `func image(at time: CMTime) async throws -> (image: CGImage, actualTime: CMTime)` (iOS 16, macOS 13).
    @available(iOS 16.0, macOS 13.0, tvOS 16.0, visionOS 1.0, *)
    public func image(at time: CMTime) async throws -> (image: CGImage, actualTime: CMTime) { fatalError("stub") }
}
