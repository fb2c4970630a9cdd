#if canImport(Security)
import Foundation
import Security

/// The Keychain: generic passwords under `service`, accessible after first unlock, this device only.
///
/// An app with extensions (a widget, a notification service) that should share the user's session
/// creates the store the same way in the app and in every extension:
///
/// ```swift
/// let store = try KeychainSecureStore(appGroup: "group.com.example.astro")
/// let tally = Client(configuration: ClientConfiguration(baseURL: apiURL, secureStore: store))
/// ```
public struct KeychainSecureStore: SecureStore {
    private let service: String
    private let accessGroup: String?
    /// The file in the app group's container that the app and its extensions lock, one at a time, while they
    /// refresh the shared session; nil for a store of the app alone.
    public let lockFile: URL?

    /// Uses the generic passwords of `service` (for example the app's bundle identifier), for the app alone.
    public init(service: String) {
        self.service = service
        accessGroup = nil
        lockFile = nil
    }

    /// The store an app shares with its extensions: the items in the keychain access group `accessGroup`
    /// (by default the app group itself, which is also a keychain access group) and the lock file in the
    /// app group's container, so a refresh in one process never reuses a token another one already rotated.
    /// Add the App Groups capability with `appGroup` to the app and to each extension.
    ///
    /// The lock is held for one refresh round trip at most. iOS terminates a process suspended while it holds a
    /// file lock in a shared container: a process that may be suspended mid-request should send it inside a
    /// background task.
    ///
    /// - Throws: ``SecureStoreError`` when the app group is not in the target's entitlements.
    public init(appGroup: String, accessGroup: String? = nil, service: String = "tally") throws {
        guard let container = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: appGroup) else {
            throw SecureStoreError(name: appGroup, reason: "no container for this app group: add it to the App Groups entitlement")
        }
        self.service = service
        self.accessGroup = accessGroup ?? appGroup
        let file = ".tally-" + (service.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "session") + ".lock"
        lockFile = container.appendingPathComponent(file, isDirectory: false)
    }

    /// The secret stored under `name`, or nil.
    public func read(_ name: String) throws -> Data? {
        var query = baseQuery(name)
        query[kSecReturnData as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        try check(status, name, "read")
        guard let data = result as? Data else {
            throw SecureStoreError(name: name, reason: "read: unexpected item type")
        }
        return data
    }

    /// Stores `data` under `name`: updates the item if it exists, adds it otherwise.
    public func write(_ data: Data, for name: String) throws {
        let attributes: [String: Any] = [
            kSecValueData as String: data,
            kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
        ]
        let status = SecItemUpdate(baseQuery(name) as CFDictionary, attributes as CFDictionary)
        if status != errSecItemNotFound {
            return try check(status, name, "update")
        }
        let item = baseQuery(name).merging(attributes) { _, new in new }
        let added = SecItemAdd(item as CFDictionary, nil)
        if added == errSecDuplicateItem {
            // Another writer added it in between: update that one.
            return try check(SecItemUpdate(baseQuery(name) as CFDictionary, attributes as CFDictionary), name, "update")
        }
        try check(added, name, "add")
    }

    /// Deletes the secret under `name`, if any.
    public func delete(_ name: String) throws {
        let status = SecItemDelete(baseQuery(name) as CFDictionary)
        if status == errSecItemNotFound { return }
        try check(status, name, "delete")
    }

    /// On macOS the data protection keychain is the one that honours the accessibility class
    /// (it needs a signed app); iOS always uses it.
    private func baseQuery(_ name: String) -> [String: Any] {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecUseDataProtectionKeychain as String: true,
            kSecAttrService as String: service,
            kSecAttrAccount as String: name,
        ]
        if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
        return query
    }

    private func check(_ status: OSStatus, _ name: String, _ operation: String) throws {
        guard status != errSecSuccess else { return }
        let message = SecCopyErrorMessageString(status, nil).map { $0 as String } ?? "OSStatus \(status)"
        throw SecureStoreError(name: name, reason: "\(operation): \(message)")
    }
}
#endif
