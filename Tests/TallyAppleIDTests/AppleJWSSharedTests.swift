import Crypto
import Foundation
import TallyAppleJWS
import Testing

/// TallyAppleJWS, what Sign in with Apple, DeviceCheck and the App Store Server API share: base64url, the split, the
/// ES256 bearer token and its reuse window.
@Suite("Apple JWS pieces shared by the three Apple modules", .timeLimit(.minutes(1)))
struct AppleJWSSharedTests {
    @Test("base64url: every length round-trips unpadded; padding, a stray character or an impossible length is refused")
    func base64URL() {
        var generator = SystemRandomNumberGenerator()
        for count in 0..<70 {
            let bytes = (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            #expect(Base64URL.decode(text) == Data(bytes))
        }
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
        for bad in ["-_8=", "AAAAA", "AA*A", "AA.A"] { #expect(Base64URL.decode(bad) == nil, "\(bad)") }
    }

    @Test("A compact JWS is exactly three parts, split on the dots; its signing input is the first two as sent")
    func split() throws {
        let jws = try #require(CompactJWS("aGVhZA.cGF5bG9hZA.c2ln"))
        #expect(jws.header == "aGVhZA" && jws.payload == "cGF5bG9hZA" && jws.signature == "c2ln")
        #expect(jws.signingInput == Data("aGVhZA.cGF5bG9hZA".utf8))
        #expect(CompactJWS("..") != nil)
        for bad in ["", "a.b", "a.b.c.d", String(repeating: ".", count: 1000)] { #expect(CompactJWS(bad) == nil) }
    }

    @Test("A bearer token: header alg, kid (and typ when set), the claims given with absent ones left out, an ES256 signature")
    func bearerToken() throws {
        let key = P256.Signing.PrivateKey()
        let now = Date(timeIntervalSince1970: 1_800_000_000.9)
        let claims = try #require(BearerClaims(iss: "team", issuedAt: now, lifetime: 600, maximumLifetime: 3600, aud: "apple", bid: "app"))
        for (type, header) in [(nil, #"{"alg":"ES256","kid":"KEY"}"#), ("JWT", #"{"alg":"ES256","kid":"KEY","typ":"JWT"}"#)] {
            let token = try #require(ES256BearerSigner(keyId: "KEY", key: key, type: type).sign(claims))
            let jws = try #require(CompactJWS(token))
            #expect(Base64URL.decode(jws.header) == Data(header.utf8))
            #expect(Base64URL.decode(jws.payload) == Data(#"{"aud":"apple","bid":"app","exp":1800000600,"iat":1800000000,"iss":"team"}"#.utf8))
            let signature = try P256.Signing.ECDSASignature(rawRepresentation: try #require(Base64URL.decode(jws.signature)))
            #expect(key.publicKey.isValidSignature(signature, for: jws.signingInput))
        }
        #expect(ES256BearerSigner(keyId: "KEY", pem: "not a key") == nil)
        #expect(ES256BearerSigner(keyId: "KEY", pem: key.pemRepresentation) != nil)
        #expect(!"\(ES256BearerSigner(keyId: "KEY", key: key))".contains("BEGIN"))
        for lifetime in [0, -1, 3601, .infinity, .nan] {
            #expect(BearerClaims(iss: "team", issuedAt: now, lifetime: lifetime, maximumLifetime: 3600, aud: "apple") == nil)
        }
        #expect(BearerClaims(iss: "team", issuedAt: Date(timeIntervalSince1970: 1e300), lifetime: 60, maximumLifetime: 3600, aud: "a") == nil)
        #expect(ES256BearerSigner.numericDate(Date(timeIntervalSince1970: .nan)) == nil)
    }

    @Test("A token is reused from its signing until the window closes; before it (a clock moved back), or cleared, one is signed anew")
    func reuse() {
        let cache = BearerTokenCache()
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        var signed = 0
        func token(_ offset: TimeInterval) -> String {
            cache.token(at: start.addingTimeInterval(offset), reuse: 900) { () -> String in
                signed += 1
                return "token \(signed)"
            }
        }
        #expect(token(0) == "token 1")
        #expect(token(899) == "token 1")
        #expect(token(900) == "token 2")
        #expect(token(899) == "token 3", "a token from the future is not reused")
        cache.clear()
        #expect(token(899) == "token 4")
        #expect(cache.token(at: start, reuse: 0) { "once" } == "once" && cache.token(at: start, reuse: 0) { "twice" } == "twice")
    }
}
