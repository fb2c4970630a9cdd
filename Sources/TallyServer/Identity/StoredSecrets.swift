import Crypto
import Foundation
import Synchronization
import TallyAPI

/// Secrets Tally keeps for a third party — Apple's refresh token, which revokes the user's grant when the account is
/// deleted — encrypted at rest with a key derived from the signing keys: a copy of the database alone does not give
/// them away.
///
/// A sealed value is `sealed1.<key id>.<base64url of AES-GCM's nonce, ciphertext and tag>`, the purpose (what the
/// secret is) authenticated with it. It opens under any of the configured keys, so rotating the signing key (the new
/// one first, the old one kept) keeps older values readable; a value sealed under a key no longer listed does not open.
/// A stored value without the prefix is one written before sealing existed and is returned as it is.
final class StoredSecrets: Sendable {
    private let keys = Mutex<[(id: String, key: SymmetricKey)]>([])

    /// The prefix of a sealed value.
    static let prefix = "sealed1."

    /// An instance without keys: ``seal(_:purpose:)`` throws until ``install(_:)``.
    init() {}

    /// Seals with `keys.current` and opens with every one of `keys`.
    func install(_ keys: SigningKeys) {
        let derived = keys.keys.map { key in
            (id: key.id, key: HKDF<SHA256>.deriveKey(
                inputKeyMaterial: SymmetricKey(data: key.secret), info: Data("tally stored secrets v1".utf8), outputByteCount: 32))
        }
        self.keys.withLock { $0 = derived }
    }

    /// `secret` sealed for `purpose` under the current key.
    func seal(_ secret: String, purpose: String) throws -> String {
        guard let current = keys.withLock({ $0.first }) else { throw APIError(.unavailable, "The server is starting.") }
        let box = try AES.GCM.seal(Data(secret.utf8), using: current.key, authenticating: Data(purpose.utf8))
        guard let combined = box.combined else { throw APIError(.unavailable, "The secret could not be sealed.") }
        return Self.prefix + current.id + "." + Secrets.base64URL(combined)
    }

    /// The secret in `stored`, sealed for `purpose` under one of the keys (or written unsealed before sealing existed);
    /// nil when it does not open: another key's, another purpose's, edited or malformed.
    func open(_ stored: String, purpose: String) -> String? {
        guard stored.hasPrefix(Self.prefix) else { return stored }
        let parts = stored.dropFirst(Self.prefix.count).split(separator: ".", maxSplits: 1)
        guard parts.count == 2, let bytes = Secrets.base64URLDecoded(String(parts[1])),
            let key = keys.withLock({ $0.first { $0.id == parts[0] }?.key }),
            let box = try? AES.GCM.SealedBox(combined: bytes),
            let opened = try? AES.GCM.open(box, using: key, authenticating: Data(purpose.utf8))
        else { return nil }
        return String(decoding: opened, as: UTF8.self)
    }
}
