// Stub of Apple's Image I/O, for scripts/apple-typecheck only: the declarations the SDK uses, with the signatures
// Apple documents. Nothing here runs. Image I/O's headers include Core Graphics (and through it Core Foundation), which
// `import ImageIO` therefore re-exports.
@_exported import CoreGraphics

/// https://developer.apple.com/documentation/imageio/cgimagedestination
/// `class CGImageDestination` (a Core Foundation type; iOS 4).
public final class CGImageDestination {}

/// https://developer.apple.com/documentation/imageio/cgimagedestinationcreatewithdata(_:_:_:_:)
/// `func CGImageDestinationCreateWithData(_ data: CFMutableData, _ type: CFString, _ count: Int,
///     _ options: CFDictionary?) -> CGImageDestination?`
public func CGImageDestinationCreateWithData(
    _ data: CFMutableData, _ type: CFString, _ count: Int, _ options: CFDictionary?
) -> CGImageDestination? { fatalError("stub") }

/// https://developer.apple.com/documentation/imageio/cgimagedestinationaddimage(_:_:_:)
/// `func CGImageDestinationAddImage(_ idst: CGImageDestination, _ image: CGImage, _ properties: CFDictionary?)`
public func CGImageDestinationAddImage(_ idst: CGImageDestination, _ image: CGImage, _ properties: CFDictionary?) {}

/// https://developer.apple.com/documentation/imageio/cgimagedestinationfinalize(_:)
/// `func CGImageDestinationFinalize(_ idst: CGImageDestination) -> Bool`
public func CGImageDestinationFinalize(_ idst: CGImageDestination) -> Bool { fatalError("stub") }

/// https://developer.apple.com/documentation/imageio/kcgimagedestinationlossycompressionquality
/// `let kCGImageDestinationLossyCompressionQuality: CFString` (a CFNumber from 0.0 to 1.0; iOS 4).
public let kCGImageDestinationLossyCompressionQuality: CFString = "kCGImageDestinationLossyCompressionQuality"
