import Foundation
import TallyAPI
import TallyAppleID
import TallyDevAppStore
@testable import TallyServer
import TallyStore
import Testing

/// What one Sign in with Apple credential is good for, through the real HTTP stack with the stand-in: an identity
/// token signs in once (on each store, and across two PostgreSQL processes), except that the `account_exists` answer
/// does not use it up and a merge may be retried with it; an authorization code counts only with the identity token
/// it was issued with, and only once the app has decided.
@Suite("Sign in with Apple: one credential, one sign-in", .timeLimit(.minutes(3)))
struct AppleTokenUseTests {
    /// A token and code the stand-in minted for `sub`, with the raw nonce its `nonce` claim hashes.
    struct Credential {
        let minted: DevAppleID.Minted
        let nonce: String

        static func mint(_ appleID: DevAppleID, sub: String) async throws -> Credential {
            let nonce = AppleNonce.make().raw
            return Credential(minted: try await appleID.identityToken(sub: sub, nonce: nonce), nonce: nonce)
        }

        /// The request signing in with it (with its authorization code when `code`).
        func request(merge: Bool? = nil, code: Bool = false, authorizationCode: String? = nil) -> AppleSignInRequest {
            AppleSignInRequest(
                identityToken: minted.identityToken, nonce: nonce, authorizationCode: authorizationCode ?? (code ? minted.authorizationCode : nil),
                merge: merge)
        }
    }

    static func signIn(_ api: APIConnection, _ request: AppleSignInRequest, as caller: TestUser? = nil) async throws -> APIResponse {
        try await api.send(.post, "/v1/auth/apple", token: caller?.accessToken, json: request)
    }

    static func newSub() -> String { "001234." + UUID().uuidString.prefix(12).lowercased() }

    @Test("An identity token signs in once: the same token and nonce again are refused (401 token_used)", arguments: StoreKind.allCases)
    func singleUse(kind: StoreKind) async throws {
        try await AppleSignInTests.with(kind) { server, appleID, api in
            let credential = try await Credential.mint(appleID, sub: Self.newSub())
            let first = try await Self.signIn(api, credential.request())
            #expect(first.status == .created, "\(first.text)")
            server.clock.advance(by: 30)
            let replayed = try await Self.signIn(api, credential.request())
            #expect(replayed.status == .unauthorized && replayed.errorCode == "token_used", "\(replayed.status) \(replayed.text)")
            // Also from a guest, and from the account itself.
            let guest = try await api.newGuest()
            let fromGuest = try await Self.signIn(api, credential.request(merge: true), as: guest)
            #expect(fromGuest.status == .unauthorized && fromGuest.errorCode == "token_used", "\(fromGuest.text)")
            let fromAccount = try await Self.signIn(api, credential.request(), as: try first.testUser())
            #expect(fromAccount.status == .unauthorized && fromAccount.errorCode == "token_used", "\(fromAccount.text)")
            #expect(try await api.wallet(guest).balance >= 0, "the guest still signed in")
        }
    }

    @Test("account_exists does not use the token or the code up: the decision comes with the same ones, a merge may be retried with them, nothing else",
        arguments: StoreKind.allCases)
    func accountExistsKeepsTheCredential(kind: StoreKind) async throws {
        try await AppleSignInTests.withTokens(kind) { _, appleID, api in
            let sub = Self.newSub()
            let account = try await Self.signIn(api, try await Credential.mint(appleID, sub: sub).request(code: true)).testUser()
            #expect(appleID.exchanges.count == 1)
            let guest = try await api.newGuest(granted: 30)
            let credential = try await Credential.mint(appleID, sub: sub)
            for _ in 0..<2 {
                let asked = try await Self.signIn(api, credential.request(code: true), as: guest)
                #expect(asked.status == .conflict && asked.errorCode == "account_exists", "\(asked.text)")
            }
            #expect(appleID.exchanges.count == 1, "asking exchanged no code")
            let merged = try await Self.signIn(api, credential.request(merge: true, code: true), as: guest)
            #expect(merged.status == .ok, "\(merged.text)")
            let summary = try merged.decode(SessionTokens.self).merged
            #expect(summary?.tokensMoved == 30 && (try? merged.testUser())?.userId == account.userId)
            #expect(appleID.exchanges.count == 2, "the decision's code was exchanged")
            // The app lost the answer: the same request again answers the same summary.
            let retried = try await Self.signIn(api, credential.request(merge: true, code: true), as: guest)
            #expect(retried.status == .ok && (try? retried.decode(SessionTokens.self))?.merged == summary, "\(retried.text)")
            // Nothing else: the token without the guest, or from another guest.
            let plain = try await Self.signIn(api, credential.request())
            #expect(plain.status == .unauthorized && plain.errorCode == "token_used", "\(plain.text)")
            let other = try await api.newGuest(granted: 5)
            let otherMerge = try await Self.signIn(api, credential.request(merge: true), as: other)
            #expect(otherMerge.status == .unauthorized && otherMerge.errorCode == "token_used", "\(otherMerge.text)")
            #expect(try await api.wallet(other).balance == 5, "the other guest keeps its tokens")
        }
    }

    @Test("An authorization code issued for another Apple user is refused (401 authorization_code_mismatch) and nothing is stored",
        arguments: StoreKind.allCases)
    func codeBoundToToken(kind: StoreKind) async throws {
        try await AppleSignInTests.withTokens(kind) { server, appleID, api in
            let (victimSub, attackerSub) = (Self.newSub(), Self.newSub())
            let victim = try await Credential.mint(appleID, sub: victimSub)
            let attacker = try await Credential.mint(appleID, sub: attackerSub)
            let stolen = try await Self.signIn(api, attacker.request(authorizationCode: victim.minted.authorizationCode))
            #expect(stolen.status == .unauthorized && stolen.errorCode == "authorization_code_mismatch", "\(stolen.status) \(stolen.text)")
            #expect(try await server.services.store.appleAccount(subject: attackerSub) == nil, "no account made")
            #expect(try await server.services.store.appleAccount(subject: victimSub) == nil)

            // From a signed-in account: not linked, no token kept. (The victim's code above is spent: Apple refuses it,
            // and a code Apple refuses leaves the sign-in to the identity token, storing no refresh token.)
            let guest = try await api.newGuest()
            let other = try await Credential.mint(appleID, sub: attackerSub)
            let victimAgain = try await Credential.mint(appleID, sub: victimSub)
            let fromGuest = try await Self.signIn(api, other.request(authorizationCode: victimAgain.minted.authorizationCode), as: guest)
            #expect(fromGuest.status == .unauthorized && fromGuest.errorCode == "authorization_code_mismatch", "\(fromGuest.text)")
            #expect(try await server.services.store.appleIdentity(userId: guest.userId) == nil, "the guest got no Apple identity")

            // Its own code signs in and is kept.
            let own = try await Self.signIn(api, attacker.request(code: true))
            #expect(own.status == .created, "\(own.text)")
            let stored = try await server.services.store.appleIdentity(userId: try own.testUser().userId)
            #expect(stored?.refreshToken != nil)
        }
    }

    @Test("Across two PostgreSQL processes: one token sent to both at once signs in once")
    func acrossProcesses() async throws {
        try await AppleSignInTests.withPair { pair, appleID in
            let credential = try await Credential.mint(appleID, sub: Self.newSub())
            let answers = try await concurrently(8, connect: { pair.connection($0 % 2) }) { _, api in
                try await Self.signIn(api, credential.request())
            }
            let statuses = answers.map(\.status.code)
            #expect(statuses.filter { $0 == 201 }.count == 1, "\(statuses)")
            #expect(answers.filter { $0.status == .unauthorized && $0.errorCode == "token_used" }.count == 7, "\(answers.map(\.text))")
            let later = pair.connection(1)
            let replayed = try await Self.signIn(later, credential.request())
            #expect(replayed.status == .unauthorized && replayed.errorCode == "token_used", "\(replayed.text)")
            await later.close()
            #expect(pair.stop() == [.exited(0), .exited(0)])
        }
    }
}
