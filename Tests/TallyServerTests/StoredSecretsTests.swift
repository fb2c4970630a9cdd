import Foundation
import Testing

@testable import TallyServer

/// Secrets kept for third parties are sealed with keys derived from the signing keys (``StoredSecrets``).
@Suite("Stored secrets", .timeLimit(.minutes(1)))
struct StoredSecretsTests {
    static let purpose = StoredSecrets.appleRefreshToken

    @Test("A sealed secret opens to itself, for its purpose only, and hides it; each seal differs")
    func roundTrip() throws {
        let secrets = StoredSecrets()
        #expect(throws: APIError.self) { try secrets.seal("r.token", purpose: Self.purpose) }
        let keys = try SigningKeys(parsing: Secrets.random(bytes: 32))
        secrets.install(keys)
        let token = "r" + Secrets.random(bytes: 48)
        let sealed = try secrets.seal(token, purpose: Self.purpose)
        #expect(sealed.hasPrefix(StoredSecrets.prefix + keys.current.id + ".") && !sealed.contains(token))
        #expect(secrets.open(sealed, purpose: Self.purpose) == token)
        #expect(secrets.open(sealed, purpose: "another") == nil, "another purpose's")
        #expect(try secrets.seal(token, purpose: Self.purpose) != sealed, "a fresh nonce each time")
        #expect(secrets.open("r.written-before-sealing", purpose: Self.purpose) == "r.written-before-sealing")
    }

    @Test("An edited, cut or malformed value does not open")
    func tampered() throws {
        let secrets = StoredSecrets()
        secrets.install(try SigningKeys(parsing: Secrets.random(bytes: 32)))
        let sealed = try secrets.seal("r.token", purpose: Self.purpose)
        var bytes = Array(sealed.utf8)
        bytes[bytes.count - 3] = bytes[bytes.count - 3] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        for value in [String(decoding: bytes, as: UTF8.self), String(sealed.dropLast(4)), StoredSecrets.prefix, StoredSecrets.prefix + "x.y",
            StoredSecrets.prefix + "..", sealed + "."]
        {
            #expect(secrets.open(value, purpose: Self.purpose) == nil, "\(value)")
        }
    }

    @Test("After a key rotation a value sealed before opens while the old key is listed, and not once it is removed")
    func rotation() throws {
        let (old, new) = (Secrets.random(bytes: 32), Secrets.random(bytes: 32))
        let secrets = StoredSecrets()
        secrets.install(try SigningKeys(parsing: old))
        let before = try secrets.seal("r.before", purpose: Self.purpose)
        secrets.install(try SigningKeys(parsing: "\(new),\(old)"))
        #expect(secrets.open(before, purpose: Self.purpose) == "r.before")
        let after = try secrets.seal("r.after", purpose: Self.purpose)
        secrets.install(try SigningKeys(parsing: new))
        #expect(secrets.open(before, purpose: Self.purpose) == nil)
        #expect(secrets.open(after, purpose: Self.purpose) == "r.after")
    }
}
