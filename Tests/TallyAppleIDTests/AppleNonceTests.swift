import Foundation
import TallyAppleID
import TallyAppleJWS
import Testing

@Suite("Sign in with Apple nonces", .timeLimit(.minutes(1)))
struct AppleNonceTests {
    @Test("A nonce's hash is the lowercase hex SHA-256 of its raw string, and raw nonces are 32 random bytes")
    func hash() {
        #expect(AppleNonce.hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let (raw, hashed) = AppleNonce.make()
        #expect(Base64URL.decode(raw)?.count == 32)
        #expect(hashed == AppleNonce.hash(raw) && hashed.count == 64)
        #expect(AppleNonce.make().raw != raw)
    }
}
