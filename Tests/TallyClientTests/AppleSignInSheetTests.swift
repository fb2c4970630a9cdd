import Foundation
import TallyAPI
@testable import TallyClient
import TallyTestSupport
import Testing

/// What Sign in with Apple's sheet decides on every platform (``AppleSignInSheet``): the credential's text, a closed
/// sheet, and the sign-in with the merge question — against the real server and the Sign in with Apple stand-in, whose
/// identity tokens carry the sheet's nonce hash as Apple's do.
@Suite("Sign in with Apple's sheet", .timeLimit(.minutes(1)))
struct AppleSignInSheetTests {
    @Test("The credential's token and code are read as UTF-8; a credential without a token is refused")
    func credentialText() throws {
        let (token, code) = try AppleSignInSheet.credentialText(identityToken: Data("eyJ.a.b".utf8), authorizationCode: Data("c0de".utf8))
        #expect(token == "eyJ.a.b" && code == "c0de")
        #expect(try AppleSignInSheet.credentialText(identityToken: Data("t".utf8), authorizationCode: nil).code == nil)
        #expect(try AppleSignInSheet.credentialText(identityToken: Data("t".utf8), authorizationCode: Data()).code == nil)
        for missing in [nil, Data(), Data([0xFF, 0xFE])] {
            let refused = #expect(throws: ClientError.self) { try AppleSignInSheet.credentialText(identityToken: missing, authorizationCode: nil) }
            #expect(refused?.code == .invalidResponse)
        }
    }

    @Test("Only ASAuthorizationError.canceled is a closed sheet")
    func cancellation() {
        let domain = "com.apple.AuthenticationServices.AuthorizationError"
        #expect(AppleSignInSheet.isCancellation(NSError(domain: domain, code: 1001)))
        #expect(!AppleSignInSheet.isCancellation(NSError(domain: domain, code: 1000)), "unknown")
        #expect(!AppleSignInSheet.isCancellation(NSError(domain: domain, code: 1004)), "failed")
        #expect(!AppleSignInSheet.isCancellation(NSError(domain: NSURLErrorDomain, code: 1001)))
        #expect(!AppleSignInSheet.isCancellation(ClientError(.offline)))
    }

    @Test("A closed sheet signs nobody in; a failure or another kind of credential is thrown; nothing is sent")
    func finishWithoutCredential() async throws {
        try await MergeSyncTests.with(.sqlite) { server, _ in
            let (client, transport) = server.client()
            let sheet = AppleSignInSheet()
            let closed = NSError(domain: "com.apple.AuthenticationServices.AuthorizationError", code: 1001)
            let none = try await sheet.finish(.failure(closed), client: client, merge: { _ in true })
            #expect(none == nil)
            let failed = NSError(domain: "com.apple.AuthenticationServices.AuthorizationError", code: 1004)
            await #expect(throws: (any Error).self) { try await sheet.finish(.failure(failed), client: client, merge: { _ in true }) }
            let other = await #expect(throws: ClientError.self) { try await sheet.finish(.otherCredential, client: client, merge: { _ in true }) }
            #expect(other?.code == .invalidResponse)
            #expect(transport.requests.isEmpty)
            #expect(await client.user == nil)
        }
    }

    @Test("The request carries the SHA-256 of the nonce the server is sent; each sheet has its own")
    func requestNonce() {
        let nonce = AppleSignInNonce(raw: "abc")
        #expect(AppleSignInSheet(nonce: nonce).requestNonce == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(AppleSignInSheet().requestNonce != AppleSignInSheet().requestNonce)
    }

    @Test("A sheet signs in; a guest reaching an account is asked once, and its answer goes with the same token",
        arguments: [false, true])
    func mergeQuestion(merge: Bool) async throws {
        try await MergeSyncTests.with(.sqlite) { server, appleID in
            let (first, _) = server.client()
            let sheet = AppleSignInSheet()
            let token = try await appleID.identityToken(sub: "001234.sheet", nonce: sheet.nonce.raw).identityToken
            let asked = Locked<[GuestProgress?]>([])
            let account = try await sheet.signIn(first, identityToken: Data(token.utf8), authorizationCode: nil) { guest in
                asked.withLock { $0.append(guest) }
                return true
            }
            #expect(asked.withLock { $0 }.isEmpty, "a new Apple ID asks nothing")

            let (client, _) = server.client()
            let guest = try await client.signInAsGuest()
            try await server.grant(30, to: guest.userId)
            let second = AppleSignInSheet()
            let again = try await appleID.identityToken(sub: "001234.sheet", nonce: second.nonce.raw).identityToken
            let result = try await second.signIn(client, identityToken: Data(again.utf8), authorizationCode: nil) { guest in
                asked.withLock { $0.append(guest) }
                return merge
            }
            #expect(asked.withLock { $0 } == [GuestProgress(balance: 30, documents: 0, purchases: 0)])
            #expect(result.user.userId == account.user.userId)
            #expect(result.merged?.guestUserId == (merge ? guest.userId : nil))
            #expect(try await client.fetch(client.walletQuery, forceRefresh: true).balance == (merge ? 30 : 0))
        }
    }
}
