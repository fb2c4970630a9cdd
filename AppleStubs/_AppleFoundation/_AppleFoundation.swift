// Foundation's and Core Foundation's Apple-only parts as the Apple stubs see them, for scripts/apple-typecheck only. On Apple platforms these types live in
// CoreFoundation, which Security, ImageIO and CoreGraphics re-export, and are toll-free bridged to Foundation's
// classes (`kSecClass as String`, `query as CFDictionary`, `result as? Data`). Linux's CoreFoundation has no such
// bridging, so each is an alias of the class it bridges to: the same casts type-check the same way. What this cannot
// check: a CF call's ownership (Unmanaged, Copy/Create rules). Nothing here runs.
@_exported import Foundation

/// https://developer.apple.com/documentation/corefoundation/cfstring (toll-free bridged with NSString)
public typealias CFString = NSString
/// https://developer.apple.com/documentation/corefoundation/cfdictionary (toll-free bridged with NSDictionary)
public typealias CFDictionary = NSDictionary
/// https://developer.apple.com/documentation/corefoundation/cfmutabledata (toll-free bridged with NSMutableData)
public typealias CFMutableData = NSMutableData
/// https://developer.apple.com/documentation/corefoundation/cfdata (toll-free bridged with NSData)
public typealias CFData = NSData
/// https://developer.apple.com/documentation/corefoundation/cftyperef: `typealias CFTypeRef = AnyObject`
public typealias CFTypeRef = AnyObject
/// https://developer.apple.com/documentation/kernel/osstatus: `typealias OSStatus = Int32`
public typealias OSStatus = Int32

extension FileManager {
    /// https://developer.apple.com/documentation/foundation/filemanager/containerurl(forsecurityapplicationgroupidentifier:)
    /// `func containerURL(forSecurityApplicationGroupIdentifier groupIdentifier: String) -> URL?` (Apple platforms only).
    public func containerURL(forSecurityApplicationGroupIdentifier groupIdentifier: String) -> URL? { fatalError("stub") }
}
