// Stub of Apple's Uniform Type Identifiers framework, for scripts/apple-typecheck only: the declarations the SDK uses,
// with the signatures Apple documents. Nothing here runs.
@_exported import Foundation

/// https://developer.apple.com/documentation/uniformtypeidentifiers/uttype-swift.struct
/// `struct UTType` (iOS 14, macOS 11): Hashable, Sendable, Codable.
@available(iOS 14.0, macOS 11.0, tvOS 14.0, watchOS 7.0, *)
public struct UTType: Hashable, Sendable, Codable, CustomStringConvertible, CustomDebugStringConvertible {
    /// https://developer.apple.com/documentation/uniformtypeidentifiers/uttype-swift.struct/init(_:)
    /// `init?(_ identifier: String)`
    public init?(_ identifier: String) { fatalError("stub") }

    /// https://developer.apple.com/documentation/uniformtypeidentifiers/uttype-swift.struct/identifier
    /// `var identifier: String { get }` ("public.jpeg" for `.jpeg`).
    public var identifier: String { fatalError("stub") }
    /// https://developer.apple.com/documentation/uniformtypeidentifiers/uttype-swift.struct/preferredmimetype
    /// `var preferredMIMEType: String? { get }`
    public var preferredMIMEType: String? { fatalError("stub") }

    public var description: String { fatalError("stub") }
    public var debugDescription: String { fatalError("stub") }

    /// https://developer.apple.com/documentation/uniformtypeidentifiers/uttype-swift.struct/jpeg
    /// `static var jpeg: UTType { get }` (public.jpeg)
    public static var jpeg: UTType { fatalError("stub") }
    /// https://developer.apple.com/documentation/uniformtypeidentifiers/uttype-swift.struct/png
    /// `static var png: UTType { get }` (public.png)
    public static var png: UTType { fatalError("stub") }
    /// https://developer.apple.com/documentation/uniformtypeidentifiers/uttype-swift.struct/image
    /// `static var image: UTType { get }` (public.image)
    public static var image: UTType { fatalError("stub") }
}
