import Foundation
import TallyAppleID
import TallyAppleJWS
import TallyDevAppStore
import TallyTestKit
import Testing

/// The stand-in's own rules: its keys kept in a directory, its HTTP API's identity tokens and refusals.
@Suite("Sign in with Apple stand-in", .timeLimit(.minutes(2)))
struct DevAppleIDTests {
    @Test("The key set is kept in the directory (owner-only): a restart signs with the same keys, a rotation is written")
    func keysInDirectory() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("appleid-keys-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = try DevAppleIDKeys.loadOrGenerate(directory: directory)
        let path = directory.appendingPathComponent(DevAppleIDKeys.File.keys).path
        let permissions = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(permissions == 0o600)
        let again = try DevAppleIDKeys.loadOrGenerate(directory: directory)
        #expect(again.jwks == first.jwks && again.keys.count == 1)

        var configuration = DevAppleID.Configuration()
        configuration.keysDirectory = directory
        let appleID = DevAppleID(configuration: configuration, keys: again, clock: ManualClock(AppleIDFixture.start))
        let kid = try appleID.rotateKeys()
        let reloaded = try DevAppleIDKeys.loadOrGenerate(directory: directory)
        #expect(reloaded.signing.kid == kid && reloaded.jwks == appleID.jwks() && reloaded.keys.count == 2)
    }

    @Test("Over HTTP: the key set is Apple's shape, a token is minted for a chosen sub, email and nonce, a defect by name; bad requests are 400")
    func httpAPI() async throws {
        try await AppleIDFixture.with { fixture in
            let (status, keys) = try await call(.GET, fixture.base + "/auth/keys")
            let set = try JSONDecoder().decode(AppleJSONWebKeySet.self, from: keys)
            #expect(status == 200)
            try #require(set.keys.count == 1)
            #expect(set.keys[0].kty == "RSA" && set.keys[0].alg == "RS256" && set.keys[0].use == "sig" && set.keys[0].e == "AQAB")
            #expect(Base64URL.decode(set.keys[0].n)?.count == 256, "RSA-2048")

            let nonce = AppleNonce.make()
            let body = #"{"sub":"000042.feedface.0042","email":"me@example.com","isPrivateEmail":false,"nonce":"\#(nonce.raw)"}"#
            let (minted, answer) = try await call(.POST, fixture.base + "/auth/identity-token", json: body)
            #expect(minted == 200)
            let token = try #require(try object(answer)["identityToken"] as? String)
            #expect(try object(answer)["sub"] as? String == "000042.feedface.0042" && (try object(answer)["authorizationCode"] as? String) != nil)
            let identity = try await fixture.verify(token, nonce: nonce.raw)
            #expect(identity.sub == "000042.feedface.0042" && identity.email == "me@example.com" && !identity.isPrivateEmail)

            let (defective, wrong) = try await call(.POST, fixture.base + "/auth/identity-token", json: #"{"nonce":"n","defect":"wrongIssuer"}"#)
            let wrongToken = try #require(try object(wrong)["identityToken"] as? String)
            let outcome = await Outcome.of { _ = try await fixture.verify(wrongToken, nonce: "n") }
            #expect(defective == 200 && outcome == .refused(.wrongIssuer))

            for bad in [#"{"defect":"nonsense"}"#, #"{"expiresIn":0}"#, "not json"] {
                let (refused, _) = try await call(.POST, fixture.base + "/auth/identity-token", json: bad)
                #expect(refused == 400, "\(bad)")
            }
        }
    }
}
