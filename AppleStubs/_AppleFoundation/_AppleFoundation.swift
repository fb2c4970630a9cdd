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

extension ProcessInfo {
    /// https://developer.apple.com/documentation/foundation/processinfo/performexpiringactivity(withreason:using:)
    /// `func performExpiringActivity(withReason reason: String, using block: @escaping @Sendable (Bool) -> Void)`
    /// (iOS 8.2, tvOS 9, watchOS 2, visionOS 1; not macOS): the block runs on a queue of the system's, with false to
    /// begin (the activity lasts while it runs) and again with true when the process is about to be suspended.
    @available(iOS 8.2, tvOS 9.0, watchOS 2.0, visionOS 1.0, *)
    @available(macOS, unavailable)
    public func performExpiringActivity(withReason reason: String, using block: @escaping @Sendable (Bool) -> Void) {}
}
