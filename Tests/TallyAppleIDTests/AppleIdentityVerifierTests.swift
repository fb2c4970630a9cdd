import Foundation
import TallyAppleID
import TallyDevAppStore
import Testing

/// `AppleIdentityVerifier` against identity tokens the stand-in signs, its keys fetched over loopback HTTP: what is
/// accepted, each refusal by name, the refetch on an unknown `kid` and its limit, key rotation followed without a
/// restart.
@Suite("Sign in with Apple identity tokens", .timeLimit(.minutes(2)))
struct AppleIdentityVerifierTests {
    // MARK: Acceptance

    @Test("A good token verifies: Apple's sub, the relay email as a contact, the private-relay flag, the audience and dates")
    func acceptsToken() async throws {
        try await AppleIDFixture.with { fixture in
            let nonce = AppleNonce.make()
            let minted = try await fixture.appleID.identityToken(
                sub: "001234.0123456789abcdef0123456789abcdef.0987", email: "x7k2p9@privaterelay.appleid.com", isPrivateEmail: true,
                nonce: nonce.raw)
            #expect(try jwtPart(minted.identityToken, 1)["nonce"] as? String == nonce.hashed, "the token carries the hash, never the raw nonce")
            let identity = try await fixture.verify(minted.identityToken, nonce: nonce.raw)
            #expect(identity.sub == "001234.0123456789abcdef0123456789abcdef.0987" && identity.sub == minted.sub)
            #expect(identity.email == "x7k2p9@privaterelay.appleid.com" && identity.isPrivateEmail && identity.emailVerified)
            #expect(identity.audience == AppleIDFixture.clientId)
            #expect(identity.issuedAt == fixture.now && identity.expiresAt == fixture.now.addingTimeInterval(600))
            #expect(fixture.fetcher.count == 1 && fixture.appleID.keyRequests == 1, "the key set was fetched once, over HTTP")

            let plain = try await fixture.appleID.identityToken(nonce: nonce.raw)
            let second = try await fixture.verify(plain.identityToken, nonce: nonce.raw)
            #expect(second.email == nil && !second.isPrivateEmail && !second.emailVerified && second.sub == plain.sub)
            #expect(fixture.fetcher.count == 1, "a known kid is answered from the cache")
        }
    }

    @Test("A token verifies up to exp plus the leeway, at the injected clock, and is refused as expired after it")
    func expiryAtTheInjectedClock() async throws {
        try await AppleIDFixture.with { fixture in
            let nonce = AppleNonce.make()
            let minted = try await fixture.appleID.identityToken(nonce: nonce.raw)
            let exp = fixture.now.addingTimeInterval(600)
            let justInside = await Outcome.of { _ = try await fixture.verify(minted.identityToken, nonce: nonce.raw, at: exp.addingTimeInterval(59)) }
            #expect(justInside == .accepted)
            let past = await Outcome.of { _ = try await fixture.verify(minted.identityToken, nonce: nonce.raw, at: exp.addingTimeInterval(61)) }
            #expect(past == .refused(.expired))
            let early = await Outcome.of {
                _ = try await fixture.verify(minted.identityToken, nonce: nonce.raw, at: fixture.now.addingTimeInterval(-120))
            }
            #expect(early == .refused(.expired), "issued after the verifier's now (beyond the leeway)")
        }
    }

    @Test("A token's digest names the token: another token has another, and a copy whose signature is spelt otherwise is refused or has the same")
    func tokenDigest() async throws {
        try await AppleIDFixture.with { fixture in
            let nonce = AppleNonce.make()
            let minted = try await fixture.appleID.identityToken(nonce: nonce.raw)
            let identity = try await fixture.verify(minted.identityToken, nonce: nonce.raw)
            #expect(identity.tokenDigest.count == 64 && identity.tokenDigest.allSatisfy(\.isHexDigit))
            #expect(try await fixture.verify(minted.identityToken, nonce: nonce.raw).tokenDigest == identity.tokenDigest)
            // Another token of the same user, a second later: at the same instant its claims would be the same, and an
            // RSA PKCS #1 v1.5 signature over the same bytes is the same token (it did happen: the stand-in's claims
            // are encoded in a key order that varies from one encoding to the next, and sometimes matches).
            fixture.clock.advance(by: 1)
            let other = try await fixture.appleID.identityToken(sub: minted.sub, nonce: nonce.raw)
            #expect(try await fixture.verify(other.identityToken, nonce: nonce.raw).tokenDigest != identity.tokenDigest)
            // A 2,048-bit signature in 342 base64url characters leaves the last one 4 bits that decode to nothing.
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
            var respelt = minted.identityToken
            let last = try #require(alphabet.firstIndex(of: respelt.removeLast()))
            respelt.append(alphabet[last ^ 1])
            do throws(AppleIDVerificationError) {
                let copy = try await fixture.verify(respelt, nonce: nonce.raw)
                #expect(copy.tokenDigest == identity.tokenDigest, "the same token")
            } catch {
                #expect(error.code == .invalidSignature || error.code == .malformed, "\(error)")
            }
        }
    }

    // MARK: Refusals

    /// A defect the stand-in signs with and the refusal it must get.
    static let defects: [(DevAppleIDDefect, AppleIDVerificationError.Code)] = [
        (.wrongIssuer, .wrongIssuer), (.expired, .expired), (.issuedInFuture, .expired), (.tampered, .invalidSignature),
        (.foreignKey, .invalidSignature), (.unknownKid, .unknownKey), (.algNone, .unsupportedAlgorithm),
        (.algHS256, .unsupportedAlgorithm), (.missingNonce, .wrongNonce),
    ]

    @Test("Each defect signs nobody in, with its own refusal", arguments: defects)
    func refusesDefect(defect: DevAppleIDDefect, expected: AppleIDVerificationError.Code) async throws {
        try await AppleIDFixture.with { fixture in
            let nonce = AppleNonce.make()
            let minted = try await fixture.appleID.identityToken(email: "a@example.com", nonce: nonce.raw, defect: defect)
            #expect(await Outcome.of { _ = try await fixture.verify(minted.identityToken, nonce: nonce.raw) } == .refused(expected))
            let good = try await fixture.appleID.identityToken(nonce: nonce.raw)
            #expect(await Outcome.of { _ = try await fixture.verify(good.identityToken, nonce: nonce.raw) } == .accepted, "the same token signed well")
        }
    }

    @Test("Another app's audience, a wrong or missing nonce, and shapes that are not a JWS are refused by name")
    func refusesClaimsAndShapes() async throws {
        try await AppleIDFixture.with { fixture in
            let nonce = AppleNonce.make()
            let other = try await fixture.appleID.identityToken(nonce: nonce.raw, audience: "com.example.other")
            #expect(await Outcome.of { _ = try await fixture.verify(other.identityToken, nonce: nonce.raw) } == .refused(.wrongAudience))

            let minted = try await fixture.appleID.identityToken(nonce: nonce.raw)
            let wrong = await Outcome.of { _ = try await fixture.verify(minted.identityToken, nonce: AppleNonce.make().raw) }
            #expect(wrong == .refused(.wrongNonce))
            let hashedSentAsRaw = await Outcome.of { _ = try await fixture.verify(minted.identityToken, nonce: nonce.hashed) }
            #expect(hashedSentAsRaw == .refused(.wrongNonce), "the raw nonce is what the server hashes")

            let withoutNonce = try await fixture.appleID.identityToken()
            #expect(await Outcome.of { _ = try await fixture.verify(withoutNonce.identityToken, nonce: nonce.raw) } == .refused(.wrongNonce))

            let kid = fixture.appleID.signingKid
            let shapes = [
                "", "abc", "a.b", "a.b.c.d", "!!.!!.!!", withHeader(minted.identityToken, "not json"),
                withHeader(minted.identityToken, #"{"alg":"RS256"}"#),
            ]
            for shape in shapes {
                #expect(await Outcome.of { _ = try await fixture.verify(shape, nonce: nonce.raw) } == .refused(.malformed), "\(shape.prefix(40))")
            }
            let es256 = withHeader(minted.identityToken, #"{"alg":"ES256","kid":"\#(kid)"}"#)
            #expect(await Outcome.of { _ = try await fixture.verify(es256, nonce: nonce.raw) } == .refused(.unsupportedAlgorithm))
            let swappedHeader = withHeader(minted.identityToken, #"{"kid":"\#(kid)","alg":"RS256"}"#)
            #expect(await Outcome.of { _ = try await fixture.verify(swappedHeader, nonce: nonce.raw) } == .refused(.invalidSignature))
        }
    }

    @Test("The configuration is checked: no audience, or an empty one, is refused")
    func configuration() async throws {
        let keys = AppleKeyCache(fetcher: CountingFetcher(url: "http://127.0.0.1:1/auth/keys"))
        #expect(throws: AppleIDConfigurationError.self) { try AppleIdentityVerifier(audiences: [], keys: keys) }
        #expect(throws: AppleIDConfigurationError.self) { try AppleIdentityVerifier(audiences: [""], keys: keys) }
    }

    // MARK: Keys

    @Test("An unknown kid is fetched for once, then refused; another unknown kid within the interval fetches nothing")
    func unknownKidRefetchesOnce() async throws {
        try await AppleIDFixture.with { fixture in
            let nonce = AppleNonce.make()
            let good = try await fixture.appleID.identityToken(nonce: nonce.raw)
            _ = try await fixture.verify(good.identityToken, nonce: nonce.raw)
            #expect(fixture.fetcher.count == 1)

            fixture.clock.advance(by: 11)
            let unknown = try await fixture.appleID.identityToken(nonce: nonce.raw, defect: .unknownKid)
            #expect(await Outcome.of { _ = try await fixture.verify(unknown.identityToken, nonce: nonce.raw) } == .refused(.unknownKey))
            #expect(fixture.fetcher.count == 2, "exactly one fetch for the unknown kid")

            fixture.clock.advance(by: 1)
            for index in 0..<20 {
                let madeUp = withHeader(good.identityToken, #"{"alg":"RS256","kid":"made-up-\#(index)"}"#)
                #expect(await Outcome.of { _ = try await fixture.verify(madeUp, nonce: nonce.raw) } == .refused(.unknownKey))
            }
            #expect(fixture.fetcher.count == 2, "a flood of made-up kids within the interval fetches nothing")
            #expect(await Outcome.of { _ = try await fixture.verify(good.identityToken, nonce: nonce.raw) } == .accepted)

            fixture.clock.advance(by: 10)
            #expect(await Outcome.of { _ = try await fixture.verify(unknown.identityToken, nonce: nonce.raw) } == .refused(.unknownKey))
            #expect(fixture.fetcher.count == 3, "once the interval has passed, an unknown kid is fetched for again")
        }
    }

    @Test("A key rotation is followed without a restart: the new kid is fetched once (shared by concurrent sign-ins); a dropped key stops verifying")
    func rotation() async throws {
        try await AppleIDFixture.with { fixture in
            let nonce = AppleNonce.make()
            let before = try await fixture.appleID.identityToken(nonce: nonce.raw)
            _ = try await fixture.verify(before.identityToken, nonce: nonce.raw)
            let oldKid = fixture.appleID.signingKid

            // Over HTTP, as a developer would.
            fixture.clock.advance(by: 30)
            let (status, answer) = try await call(.POST, fixture.base + "/auth/keys/rotate", json: "{}")
            #expect(status == 200)
            let newKid = try #require(try object(answer)["kid"] as? String)
            #expect(newKid != oldKid && fixture.appleID.signingKid == newKid)
            #expect(try object(answer)["keys"] as? [String] == [newKid, oldKid])

            let after = try await fixture.appleID.identityToken(nonce: nonce.raw)
            #expect(try jwtPart(after.identityToken, 0)["kid"] as? String == newKid)
            let outcomes = await withTaskGroup(of: Outcome.self) { group in
                for _ in 0..<16 {
                    group.addTask { await Outcome.of { _ = try await fixture.verify(after.identityToken, nonce: nonce.raw) } }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes == Array(repeating: .accepted, count: 16))
            #expect(fixture.fetcher.count == 2, "sixteen sign-ins with the new kid share one fetch")
            #expect(await fixture.keys.keyIdentifiers == [newKid, oldKid].sorted())
            #expect(await Outcome.of { _ = try await fixture.verify(before.identityToken, nonce: nonce.raw) } == .accepted, "the old key is still published")

            fixture.clock.advance(by: 30)
            let dropped = try fixture.appleID.rotateKeys(dropOld: true)
            #expect(fixture.appleID.jwks().keys.map(\.kid) == [dropped])
            let latest = try await fixture.appleID.identityToken(nonce: nonce.raw)
            _ = try await fixture.verify(latest.identityToken, nonce: nonce.raw)
            #expect(fixture.fetcher.count == 3)
            #expect(await Outcome.of { _ = try await fixture.verify(after.identityToken, nonce: nonce.raw) } == .refused(.unknownKey))
            #expect(fixture.fetcher.count == 3, "the set was fetched just now: the dropped kid is refused without another fetch")
        }
    }

    @Test("Keys that cannot be fetched are keys_unavailable (a 503, not a refusal), and are not fetched for again within the interval")
    func keysUnavailable() async throws {
        try await AppleIDFixture.with { fixture in
            let nonce = AppleNonce.make()
            let minted = try await fixture.appleID.identityToken(nonce: nonce.raw)
            for url in ["http://127.0.0.1:1/auth/keys", fixture.base + "/health", fixture.base + "/nowhere"] {
                let fetcher = CountingFetcher(url: url, timeout: .milliseconds(300))
                let keys = AppleKeyCache(fetcher: fetcher, logger: quietLogger)
                let verifier = try AppleIdentityVerifier(audiences: [AppleIDFixture.clientId], keys: keys)
                for _ in 0..<3 {
                    let outcome = await Outcome.of { _ = try await verifier.verify(identityToken: minted.identityToken, rawNonce: nonce.raw, now: fixture.now) }
                    #expect(outcome == .refused(.keysUnavailable), "\(url)")
                }
                #expect(fetcher.count == 1, "\(url): one attempt within the interval")
            }
        }
    }

    @Test("A set older than its maximum age is fetched again at the next verification; a failed refresh keeps the old keys")
    func maximumAge() async throws {
        try await AppleIDFixture.with { fixture in
            let nonce = AppleNonce.make()
            let keys = AppleKeyCache(fetcher: fixture.fetcher, maximumAge: 3600, logger: quietLogger)
            let verifier = try AppleIdentityVerifier(audiences: [AppleIDFixture.clientId], keys: keys)
            let first = try await fixture.appleID.identityToken(nonce: nonce.raw)
            _ = try await verifier.verify(identityToken: first.identityToken, rawNonce: nonce.raw, now: fixture.now)
            fixture.clock.advance(by: 1800)
            let second = try await fixture.appleID.identityToken(nonce: nonce.raw)
            _ = try await verifier.verify(identityToken: second.identityToken, rawNonce: nonce.raw, now: fixture.now)
            #expect(fixture.fetcher.count == 1)
            fixture.clock.advance(by: 1800)
            let third = try await fixture.appleID.identityToken(nonce: nonce.raw)
            _ = try await verifier.verify(identityToken: third.identityToken, rawNonce: nonce.raw, now: fixture.now)
            #expect(fixture.fetcher.count == 2, "an hour after the first fetch the set is fetched again")
            fixture.clock.advance(by: 3600)
            fixture.fetcher.failing = true
            let fourth = try await fixture.appleID.identityToken(nonce: nonce.raw)
            let outcome = await Outcome.of { _ = try await verifier.verify(identityToken: fourth.identityToken, rawNonce: nonce.raw, now: fixture.now) }
            #expect(outcome == .accepted && fixture.fetcher.count == 3, "the refresh failed; the keys held still verify")
        }
    }
}
