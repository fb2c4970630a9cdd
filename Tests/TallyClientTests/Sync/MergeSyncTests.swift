import Foundation
import Hummingbird
import Logging
import TallyAPI
import TallyDevAppStore
import TallyServer
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

@testable import TallyClient

/// Sign in with Apple from the SDK against the real server, with identity tokens minted by the local stand-in: a guest
/// app whose change has not reached the server signs in to the account it turns out to have, with `merge: true`; the
/// change then syncs to the account, once, and nothing of the guest is lost.
@Suite("Client sign in with Apple and merge", .timeLimit(.minutes(1)))
struct MergeSyncTests {
    static let clientId = "com.example.oracle"

    /// A server with the sync fixture's collections accepting tokens from a stand-in (on the server's clock) it reaches
    /// over loopback, and that stand-in.
    static func with(_ kind: StoreKind, _ body: @Sendable (TallyTestServer, DevAppleID) async throws -> Void) async throws {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        try await AppleIDStandIn.serving(clientId: clientId, clock: clock) { appleID, keysURL in
            let apple = try SignInWithAppleConfiguration(audiences: [clientId], keysURL: keysURL)
            try await TallyTestServer.with(kind, configure: { configuration in
                configuration.sync.collections = SyncedClientFixture.serverCollections
                configuration.signInWithApple = apple
            }) { server in try await body(server, appleID) }
        }
    }

    /// The account holds the account's note and the guest's offline one, which `client` pushed once.
    static func expectBothNotesOnce(_ server: TallyTestServer, _ client: Client, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let state = try await server.serverState(of: client)
        let texts = try state.changes.map { change in
            try TallyJSON.decoder().decode(Note.self, from: TallyJSON.encoder().encode(change.data)).text
        }
        #expect(texts.sorted() == ["the account's", "the guest's, offline"], "\(state.changes.map(\.id))", sourceLocation: sourceLocation)
        #expect(state.lastMutationIds[try client.syncClientId] == 1, "applied once", sourceLocation: sourceLocation)
    }

    /// A synced client in `directory` signed in as a new guest, with a note `g1` saying `text` that no push can deliver
    /// (each refused as offline until the transport's faults are cleared).
    static func guestWithUnpushedNote(
        _ server: TallyTestServer, directory: URL, text: String
    ) async throws -> (Client, FaultInjectingTransport, SessionUser) {
        let (client, transport, _) = server.syncedClient(directory: directory)
        let guest = try await client.signInAsGuest()
        try await client.waitUntilSynced()
        transport.enqueue(Array(repeating: .offline, count: 1_000), forPathPrefix: "/v1/sync/push")
        try client.collection("notes", of: Note.self).put(id: "g1", Note(date: "2027-01-02", text: text))
        return (client, transport, guest)
    }

    @Test("A guest's unpushed change, merged into the account it signs in to, reaches the account once", arguments: StoreKind.allCases)
    func unpushedChangeFollowsTheMerge(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appleID in
            // The first phone made the account with Apple and wrote a note.
            let firstDirectory = SyncedClientFixture.directory()
            defer { try? FileManager.default.removeItem(at: firstDirectory) }
            let (first, _, _) = server.syncedClient(directory: firstDirectory)
            var nonce = AppleSignInNonce()
            let account = try await first.signInWithApple(
                identityToken: try await appleID.identityToken(sub: "001234.merge", nonce: nonce.raw).identityToken, nonce: nonce)
            try first.collection("notes", of: Note.self).put(id: "n1", Note(date: "2027-01-01", text: "the account's"))
            try await first.sync.now()

            // A reinstall: a guest whose note has not reached the server (every push refused as offline).
            let directory = SyncedClientFixture.directory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let (client, transport, guest) = try await Self.guestWithUnpushedNote(server, directory: directory, text: "the guest's, offline")
            #expect(client.syncStatus.pendingMutations == 1)

            // Asked first, then merged.
            nonce = AppleSignInNonce()
            let token = try await appleID.identityToken(sub: "001234.merge", nonce: nonce.raw).identityToken
            let asked = await #expect(throws: ClientError.self) { try await client.signInWithApple(identityToken: token, nonce: nonce) }
            #expect(asked?.code == .accountExists && asked?.guest?.documents == 0, "\(String(describing: asked))")
            #expect(await client.user?.userId == guest.userId, "still the guest")
            nonce = AppleSignInNonce()
            let again = try await appleID.identityToken(sub: "001234.merge", nonce: nonce.raw).identityToken
            let merged = try await client.signInWithApple(identityToken: again, nonce: nonce, merge: true)
            #expect(merged.user.userId == account.user.userId && merged.merged?.guestUserId == guest.userId)

            // Back online: the guest's change goes to the account, once, beside the account's own note.
            transport.clearFaults()
            try await client.sync.now()
            try await Self.expectBothNotesOnce(server, client)
            #expect(client.syncStatus.pendingMutations == 0)
            try await first.sync.now()
            #expect(try first.collection("notes", of: Note.self).documents().count == 2, "the first phone sees both")
        }
    }

    @Test("A guest that declines signs in to the account with the same token; its unsynced change goes first; the guest stays the installation's",
        arguments: [StoreKind.sqlite])
    func declineKeepsTheGuest(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appleID in
            let (first, _) = server.client()
            var nonce = AppleSignInNonce()
            let account = try await first.signInWithApple(
                identityToken: try await appleID.identityToken(sub: "001234.decline", nonce: nonce.raw).identityToken, nonce: nonce)

            let directory = SyncedClientFixture.directory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let (client, transport, guest) = try await Self.guestWithUnpushedNote(server, directory: directory, text: "the guest's")

            // One sheet, one token: asked, then declined with it.
            nonce = AppleSignInNonce()
            let token = try await appleID.identityToken(sub: "001234.decline", nonce: nonce.raw).identityToken
            let asked = await #expect(throws: ClientError.self) { try await client.signInWithApple(identityToken: token, nonce: nonce) }
            #expect(asked?.code == .accountExists)
            // While the guest's change cannot reach the server, declining would lose it: refused, nothing sent.
            let refused = await #expect(throws: ClientError.self) {
                try await client.signInWithApple(identityToken: token, nonce: nonce, merge: false)
            }
            #expect(refused?.code == .pendingWrites && refused?.pendingWrites == 1, "\(String(describing: refused))")
            #expect(await client.user?.userId == guest.userId, "still the guest")

            transport.clearFaults()
            let declined = try await client.signInWithApple(identityToken: token, nonce: nonce, merge: false)
            #expect(declined.user.userId == account.user.userId && declined.merged == nil)
            try await client.waitUntilSynced()
            #expect(try client.collection("notes", of: Note.self).documents().isEmpty, "nothing of the guest in the account")

            // The guest is still this installation's, with its change.
            try await client.signOut()
            #expect(try await client.signInAsGuest().userId == guest.userId)
            try await client.waitUntilSynced()
            #expect(try client.collection("notes", of: Note.self).documents().map(\.value.text) == ["the guest's"])
        }
    }

    /// Issue 43 (the 500-switch stress test found it): the merge ends the guest's sessions, so a request of the guest in
    /// flight is refused and its refresh too; the session then signed in again as the installation's guest — a new one,
    /// the old being merged — and stored it over the account the sign-in had adopted meanwhile.
    @Test("A refresh of the guest racing its merge never signs a new guest in over the account", arguments: StoreKind.allCases)
    func refreshRacingTheMerge(kind: StoreKind) async throws {
        try await Self.with(kind) { server, appleID in
            let (first, _) = server.client()
            try await first.signInAsGuest()
            var nonce = AppleSignInNonce()
            let account = try await first.signInWithApple(
                identityToken: try await appleID.identityToken(sub: "001234.race", nonce: nonce.raw).identityToken, nonce: nonce)

            let clock = ManualClock()
            let (client, transport) = server.client(clock: clock)
            let guest = try await client.signInAsGuest()
            // The merge is done on the server; its answer is held on the client's clock.
            transport.enqueue([.delayResponse(5)], forPathPrefix: "/v1/auth/apple")
            nonce = AppleSignInNonce()
            let token = try await appleID.identityToken(sub: "001234.race", nonce: nonce.raw).identityToken
            let signIn = Task { try await client.signInWithApple(identityToken: token, nonce: nonce, merge: true) }
            try await clock.waitForSleepers(1)
            // The guest's next request is refused (its session ended with the merge), so is its refresh, and the guest
            // sign-in that follows gets the installation's new guest: its answer is held past the sign-in's.
            transport.enqueue([.delayResponse(10)], forPathPrefix: "/v1/auth/guest")
            let fetch = Task { try await client.fetch(client.walletQuery, forceRefresh: true) }
            try await clock.waitForSleepers(2)
            clock.advance(by: 5)
            #expect(try await signIn.value.user.userId == account.user.userId)
            clock.advance(by: 5)
            _ = try? await fetch.value
            #expect(transport.count(path: "/v1/auth/guest") == 2, "the refresh did sign in as the installation's guest")
            #expect(await client.user?.userId == account.user.userId, "not \(guest.userId)'s successor")
            #expect(try await client.fetch(client.meQuery, forceRefresh: true).userId == account.user.userId)
        }
    }

    @Test("Email sign-in with merge: the guest's tokens and its unpushed change reach the account once", arguments: StoreKind.allCases)
    func emailSignInMerge(kind: StoreKind) async throws {
        try await TallyTestServer.with(kind, configure: { $0.sync.collections = SyncedClientFixture.serverCollections }) { server in
            // The first phone's guest became an email account and wrote a note.
            let firstDirectory = SyncedClientFixture.directory()
            defer { try? FileManager.default.removeItem(at: firstDirectory) }
            let (first, _, _) = server.syncedClient(directory: firstDirectory)
            let account = try await first.signInAsGuest()
            _ = try await first.link(email: "merge-\(kind)@example.com", password: "correct horse battery")
            try first.collection("notes", of: Note.self).put(id: "n1", Note(date: "2027-01-01", text: "the account's"))
            try await first.sync.now()
            try await server.grant(7, to: account.userId)

            // A reinstall's guest with tokens and a change that has not reached the server.
            let directory = SyncedClientFixture.directory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let (client, transport, guest) = try await Self.guestWithUnpushedNote(server, directory: directory, text: "the guest's, offline")
            try await server.grant(5, to: guest.userId)

            let wrong = await #expect(throws: ClientError.self) {
                try await client.signIn(email: "merge-\(kind)@example.com", password: "wrong horse battery", merge: true)
            }
            let stillGuest = await client.user?.userId
            #expect(wrong?.code == .invalidCredentials && stillGuest == guest.userId, "nothing changed")
            let merged = try await client.signIn(email: "merge-\(kind)@example.com", password: "correct horse battery", merge: true)
            #expect(merged.user.userId == account.userId && merged.merged?.guestUserId == guest.userId, "\(merged)")
            #expect(merged.merged?.tokensMoved == 5)
            // An answered request: a sign that the server is back, so the engine tries its push again now (refused as
            // offline while the faults last). That retry may still be under way when the faults are cleared and
            // `sync.now()` is called below; the call gets a round of its own, not that push's failure (it did, once, on
            // CI's loaded cores: "offline").
            #expect(try await client.fetch(client.walletQuery, forceRefresh: true).balance == 12)

            transport.clearFaults()
            try await client.sync.now()
            try await Self.expectBothNotesOnce(server, client)
        }
    }

    @Test("A nonce is 32 random bytes in base64url, and its hash the SHA-256 hex Apple's request carries")
    func nonce() {
        let nonces = (0..<100).map { _ in AppleSignInNonce() }
        #expect(Set(nonces.map(\.raw)).count == 100)
        #expect(nonces.allSatisfy { $0.raw.count == 43 && $0.raw.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" } })
        #expect(AppleSignInNonce(raw: "abc").hashed == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }
}
