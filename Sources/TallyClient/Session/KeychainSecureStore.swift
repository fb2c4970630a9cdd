#if canImport(Security)
import Foundation
import Security

/// The Keychain: generic passwords under `service`, accessible after first unlock, this device only.
public struct KeychainSecureStore: SecureStore {
    private let service: String

    /// Uses the generic passwords of `service` (for example the app's bundle identifier).
    public init(service: String) {
        self.service = service
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
        [
            kSecClass as String: kSecClassGenericPassword,
            kSecUseDataProtectionKeychain as String: true,
            kSecAttrService as String: service,
            kSecAttrAccount as String: name,
        ]
    }

    private func check(_ status: OSStatus, _ name: String, _ operation: String) throws {
        guard status != errSecSuccess else { return }
        let message = SecCopyErrorMessageString(status, nil).map { $0 as String } ?? "OSStatus \(status)"
        throw SecureStoreError(name: name, reason: "\(operation): \(message)")
    }
}
#endif
