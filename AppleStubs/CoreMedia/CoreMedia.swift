// Stub of Apple's Core Media, for scripts/apple-typecheck only: the declarations the SDK uses, with the signatures
// Apple documents. Nothing here runs. Core Media re-exports Core Foundation: `_AppleFoundation`.
@_exported import _AppleFoundation

/// https://developer.apple.com/documentation/coremedia/cmtimevalue: `typealias CMTimeValue = Int64`
public typealias CMTimeValue = Int64
/// https://developer.apple.com/documentation/coremedia/cmtimescale: `typealias CMTimeScale = Int32`
public typealias CMTimeScale = Int32
/// https://developer.apple.com/documentation/coremedia/cmtimeepoch: `typealias CMTimeEpoch = Int64`
public typealias CMTimeEpoch = Int64

/// https://developer.apple.com/documentation/coremedia/cmtimeflags
/// `struct CMTimeFlags: OptionSet` (UInt32).
public struct CMTimeFlags: OptionSet, Sendable {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// https://developer.apple.com/documentation/coremedia/cmtimeflags/valid
    public static let valid = CMTimeFlags(rawValue: 1 << 0)
    /// https://developer.apple.com/documentation/coremedia/cmtimeflags/hasbeenrounded
    public static let hasBeenRounded = CMTimeFlags(rawValue: 1 << 1)
    /// https://developer.apple.com/documentation/coremedia/cmtimeflags/positiveinfinity
    public static let positiveInfinity = CMTimeFlags(rawValue: 1 << 2)
    /// https://developer.apple.com/documentation/coremedia/cmtimeflags/negativeinfinity
    public static let negativeInfinity = CMTimeFlags(rawValue: 1 << 3)
    /// https://developer.apple.com/documentation/coremedia/cmtimeflags/indefinite
    public static let indefinite = CMTimeFlags(rawValue: 1 << 4)
}

/// https://developer.apple.com/documentation/coremedia/cmtime
/// `struct CMTime` (a C struct: Sendable; Equatable and Comparable in Swift's overlay).
public struct CMTime: Sendable, Equatable, Comparable {
    /// https://developer.apple.com/documentation/coremedia/cmtime/value
    public var value: CMTimeValue
    /// https://developer.apple.com/documentation/coremedia/cmtime/timescale
    public var timescale: CMTimeScale
    /// https://developer.apple.com/documentation/coremedia/cmtime/flags
    public var flags: CMTimeFlags
    /// https://developer.apple.com/documentation/coremedia/cmtime/epoch
    public var epoch: CMTimeEpoch

    /// https://developer.apple.com/documentation/coremedia/cmtime/init()
    /// `init()`: an invalid time.
    public init() { (value, timescale, flags, epoch) = (0, 0, [], 0) }
    /// https://developer.apple.com/documentation/coremedia/cmtime/init(value:timescale:flags:epoch:)
    public init(value: CMTimeValue, timescale: CMTimeScale, flags: CMTimeFlags, epoch: CMTimeEpoch) {
        (self.value, self.timescale, self.flags, self.epoch) = (value, timescale, flags, epoch)
    }
    /// https://developer.apple.com/documentation/coremedia/cmtime/init(value:timescale:)
    /// `init(value: CMTimeValue, timescale: CMTimeScale)`
    public init(value: CMTimeValue, timescale: CMTimeScale) { fatalError("stub") }
    /// https://developer.apple.com/documentation/coremedia/cmtime/init(seconds:preferredtimescale:)
    /// `init(seconds: Double, preferredTimescale: CMTimeScale)`
    public init(seconds: Double, preferredTimescale: CMTimeScale) { fatalError("stub") }

    /// https://developer.apple.com/documentation/coremedia/cmtime/seconds
    /// `var seconds: Double { get }` (CMTimeGetSeconds: NaN for an invalid or indefinite time).
    public var seconds: Double { fatalError("stub") }

    /// https://developer.apple.com/documentation/coremedia/cmtime/zero
    /// `static let zero: CMTime` (kCMTimeZero)
    public static let zero = CMTime(value: 0, timescale: 1, flags: .valid, epoch: 0)
    /// https://developer.apple.com/documentation/coremedia/cmtime/invalid
    /// `static let invalid: CMTime` (kCMTimeInvalid)
    public static let invalid = CMTime()

    public static func == (time1: CMTime, time2: CMTime) -> Bool { fatalError("stub") }
    public static func < (time1: CMTime, time2: CMTime) -> Bool { fatalError("stub") }
}
