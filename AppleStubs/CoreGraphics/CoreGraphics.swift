// Stub of Apple's Core Graphics, for scripts/apple-typecheck only: the declarations the SDK uses, with the signatures
// Apple documents. Nothing here runs. Linux's Foundation already defines CGFloat, CGPoint, CGSize and CGRect (the
// same structs Apple's CoreFoundation/CoreGraphics define), so they are not redefined here; what Core Graphics adds to
// them is an extension. Core Graphics re-exports Core Foundation (CFString, CFDictionary, …): `_AppleFoundation`.
@_exported import _AppleFoundation

// MARK: - Affine transforms

/// https://developer.apple.com/documentation/corefoundation/cgaffinetransform
/// `struct CGAffineTransform` (a C struct of six CGFloats: Sendable; Equatable in Swift's overlay).
public struct CGAffineTransform: Equatable, Sendable {
    public var a: CGFloat
    public var b: CGFloat
    public var c: CGFloat
    public var d: CGFloat
    public var tx: CGFloat
    public var ty: CGFloat

    /// https://developer.apple.com/documentation/corefoundation/cgaffinetransform/init()
    public init() { (a, b, c, d, tx, ty) = (0, 0, 0, 0, 0, 0) }
    /// https://developer.apple.com/documentation/corefoundation/cgaffinetransform/init(a:b:c:d:tx:ty:)
    public init(a: CGFloat, b: CGFloat, c: CGFloat, d: CGFloat, tx: CGFloat, ty: CGFloat) {
        (self.a, self.b, self.c, self.d, self.tx, self.ty) = (a, b, c, d, tx, ty)
    }

    /// https://developer.apple.com/documentation/corefoundation/cgaffinetransform/identity
    /// `static let identity: CGAffineTransform`
    public static let identity = CGAffineTransform(a: 1, b: 0, c: 0, d: 1, tx: 0, ty: 0)
}

extension CGSize {
    /// https://developer.apple.com/documentation/corefoundation/cgsize/applying(_:)
    /// `func applying(_ t: CGAffineTransform) -> CGSize` (CGSizeApplyAffineTransform: rotation and scale, no
    /// translation; a width or height may come out negative).
    public func applying(_ t: CGAffineTransform) -> CGSize { fatalError("stub") }
}

extension CGPoint {
    /// https://developer.apple.com/documentation/corefoundation/cgpoint/applying(_:)
    /// `func applying(_ t: CGAffineTransform) -> CGPoint`
    public func applying(_ t: CGAffineTransform) -> CGPoint { fatalError("stub") }
}

extension CGRect {
    /// https://developer.apple.com/documentation/corefoundation/cgrect/applying(_:)
    /// `func applying(_ t: CGAffineTransform) -> CGRect`
    public func applying(_ t: CGAffineTransform) -> CGRect { fatalError("stub") }
}

// MARK: - Images, colours, colour spaces

/// https://developer.apple.com/documentation/coregraphics/cgimage
/// `class CGImage` (a Core Foundation type: immutable, Sendable in recent SDKs).
public final class CGImage: @unchecked Sendable {
    /// https://developer.apple.com/documentation/coregraphics/cgimage/width
    /// `var width: Int { get }`
    public var width: Int { fatalError("stub") }
    /// https://developer.apple.com/documentation/coregraphics/cgimage/height
    /// `var height: Int { get }`
    public var height: Int { fatalError("stub") }
    /// https://developer.apple.com/documentation/coregraphics/cgimage/alphainfo
    /// `var alphaInfo: CGImageAlphaInfo { get }`
    public var alphaInfo: CGImageAlphaInfo { fatalError("stub") }
}

/// https://developer.apple.com/documentation/coregraphics/cgimagealphainfo
/// `enum CGImageAlphaInfo: UInt32` (its `rawValue` is what a bitmap context's `bitmapInfo: UInt32` takes).
public enum CGImageAlphaInfo: UInt32, Sendable {
    case none = 0
    case premultipliedLast = 1
    case premultipliedFirst = 2
    case last = 3
    case first = 4
    case noneSkipLast = 5
    case noneSkipFirst = 6
    case alphaOnly = 7
}

/// https://developer.apple.com/documentation/coregraphics/cgcolor
/// `class CGColor` (a Core Foundation type).
public final class CGColor {
    /// https://developer.apple.com/documentation/coregraphics/cgcolor/init(red:green:blue:alpha:)
    /// `init(red: CGFloat, green: CGFloat, blue: CGFloat, alpha: CGFloat)` (sRGB; iOS 13, macOS 10.5).
    @available(iOS 13.0, macOS 10.5, tvOS 13.0, watchOS 6.0, *)
    public init(red: CGFloat, green: CGFloat, blue: CGFloat, alpha: CGFloat) { fatalError("stub") }
}

/// https://developer.apple.com/documentation/coregraphics/cgcolorspace
/// `class CGColorSpace` (a Core Foundation type).
public final class CGColorSpace {
    /// https://developer.apple.com/documentation/coregraphics/cgcolorspace/init(name:)
    /// `init?(name: CFString)`
    public init?(name: CFString) { fatalError("stub") }

    /// https://developer.apple.com/documentation/coregraphics/cgcolorspace/srgb
    /// `class let sRGB: CFString` (kCGColorSpaceSRGB; iOS 9).
    public static let sRGB: CFString = "kCGColorSpaceSRGB"
    /// https://developer.apple.com/documentation/coregraphics/cgcolorspace/displayp3
    /// `class let displayP3: CFString` (kCGColorSpaceDisplayP3; iOS 9.3).
    public static let displayP3: CFString = "kCGColorSpaceDisplayP3"
}

// MARK: - Bitmap contexts

/// https://developer.apple.com/documentation/coregraphics/cginterpolationquality
/// `enum CGInterpolationQuality: Int32`
public enum CGInterpolationQuality: Int32, Sendable {
    case `default` = 0
    case none = 1
    case low = 2
    case medium = 4
    case high = 3
}

/// https://developer.apple.com/documentation/coregraphics/cgcontext
/// `class CGContext` (a Core Foundation type; mutable drawing state, not Sendable).
public final class CGContext {
    /// https://developer.apple.com/documentation/coregraphics/cgcontext/init(data:width:height:bitspercomponent:bytesperrow:space:bitmapinfo:)
    /// `init?(data: UnsafeMutableRawPointer?, width: Int, height: Int, bitsPerComponent: Int, bytesPerRow: Int,
    ///     space: CGColorSpace, bitmapInfo: UInt32)` (CGBitmapContextCreate, as the iOS 18 SDK imports it; the 26
    /// SDK adds `init?(…, space: CGColorSpace?, bitmapInfo: CGBitmapInfo)` beside it, page `…-10b3i`).
    public init?(
        data: UnsafeMutableRawPointer?, width: Int, height: Int, bitsPerComponent: Int, bytesPerRow: Int,
        space: CGColorSpace, bitmapInfo: UInt32
    ) { fatalError("stub") }

    /// https://developer.apple.com/documentation/coregraphics/cgcontext/interpolationquality
    /// `var interpolationQuality: CGInterpolationQuality { get set }`
    public var interpolationQuality: CGInterpolationQuality { get { fatalError("stub") } set {} }

    /// https://developer.apple.com/documentation/coregraphics/cgcontext/setfillcolor(_:)-8lhn8
    /// `func setFillColor(_ color: CGColor)`
    public func setFillColor(_ color: CGColor) {}

    /// https://developer.apple.com/documentation/coregraphics/cgcontext/setfillcolor(red:green:blue:alpha:)
    /// `func setFillColor(red: CGFloat, green: CGFloat, blue: CGFloat, alpha: CGFloat)` (DeviceRGB).
    public func setFillColor(red: CGFloat, green: CGFloat, blue: CGFloat, alpha: CGFloat) {}

    /// https://developer.apple.com/documentation/coregraphics/cgcontext/fill(_:)-7a0rk
    /// `func fill(_ rect: CGRect)`
    public func fill(_ rect: CGRect) {}

    /// https://developer.apple.com/documentation/coregraphics/cgcontext/draw(_:in:bytiling:)
    /// `func draw(_ image: CGImage, in rect: CGRect, byTiling: Bool = false)`
    public func draw(_ image: CGImage, in rect: CGRect, byTiling: Bool = false) {}

    /// https://developer.apple.com/documentation/coregraphics/cgcontext/makeimage()
    /// `func makeImage() -> CGImage?`
    public func makeImage() -> CGImage? { fatalError("stub") }
}
