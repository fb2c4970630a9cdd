// Stub of Apple's Security framework (keychain items), for scripts/apple-typecheck only: the declarations the SDK
// uses, with the signatures Apple documents. Nothing here runs.
@_exported import _AppleFoundation

/// https://developer.apple.com/documentation/security/1401659-secitemcopymatching
/// `func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus`
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus { fatalError("stub") }
/// https://developer.apple.com/documentation/security/1401278-secitemadd
/// `func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus`
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus { fatalError("stub") }
/// https://developer.apple.com/documentation/security/1393617-secitemupdate
/// `func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus`
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus { fatalError("stub") }
/// https://developer.apple.com/documentation/security/1395547-secitemdelete
/// `func SecItemDelete(_ query: CFDictionary) -> OSStatus`
public func SecItemDelete(_ query: CFDictionary) -> OSStatus { fatalError("stub") }
/// https://developer.apple.com/documentation/security/1394686-seccopyerrormessagestring (iOS 11.3)
/// `func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString?`
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString? { fatalError("stub") }

/// https://developer.apple.com/documentation/security/errsecsuccess
public var errSecSuccess: OSStatus { 0 }
/// https://developer.apple.com/documentation/security/errsecitemnotfound
public var errSecItemNotFound: OSStatus { -25300 }
/// https://developer.apple.com/documentation/security/errsecduplicateitem
public var errSecDuplicateItem: OSStatus { -25299 }

// Item attribute keys and values: `let kSec…: CFString`.
/// https://developer.apple.com/documentation/security/ksecclass
public let kSecClass: CFString = "class"
/// https://developer.apple.com/documentation/security/ksecclassgenericpassword
public let kSecClassGenericPassword: CFString = "genp"
/// https://developer.apple.com/documentation/security/ksecattrservice
public let kSecAttrService: CFString = "svce"
/// https://developer.apple.com/documentation/security/ksecattraccount
public let kSecAttrAccount: CFString = "acct"
/// https://developer.apple.com/documentation/security/ksecattraccessgroup
public let kSecAttrAccessGroup: CFString = "agrp"
/// https://developer.apple.com/documentation/security/ksecattraccessible
public let kSecAttrAccessible: CFString = "pdmn"
/// https://developer.apple.com/documentation/security/ksecattraccessibleafterfirstunlockthisdeviceonly
public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = "cku"
/// https://developer.apple.com/documentation/security/ksecvaluedata
public let kSecValueData: CFString = "v_Data"
/// https://developer.apple.com/documentation/security/ksecreturndata
public let kSecReturnData: CFString = "r_Data"
/// https://developer.apple.com/documentation/security/ksecmatchlimit
public let kSecMatchLimit: CFString = "m_Limit"
/// https://developer.apple.com/documentation/security/ksecmatchlimitone
public let kSecMatchLimitOne: CFString = "m_LimitOne"
/// https://developer.apple.com/documentation/security/ksecusedataprotectionkeychain (iOS 13, macOS 10.15)
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public let kSecUseDataProtectionKeychain: CFString = "nleg"
