import Foundation
import Synchronization
import TallyAPI
import TallyDevAppStore
import TallyServer
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

@testable import TallyClient

/// Issue 43, finding 2: one `Client` whose user changes 500 times — sign-out then guest, Sign in with Apple merging the
/// guest and without a guest, email sign-in over another account — against the real in-process server, with sync, the
/// event stream and observers live and two busy threads competing for the CPU. After each change the app's first calls
/// (the profile, the documents, the wallet, a write pushed) must return within their limits and show the new user's
/// state only; the observers of the user who left must have ended.
@Suite("Client user switches under load", .serialized, .timeLimit(.minutes(6)))
struct UserSwitchStressTests {
    static let clientId = "com.example.switches"
    /// Changes of user in one run.
    static let switches = 500
    /// The most any one call may take on a loaded machine (a request is answered in milliseconds when nothing hangs).
    static let callLimit: TimeInterval = 20

    /// Who is signed in after a change, and what of theirs the app may show.
    struct Expected {
        let userId: String
        /// The balance range that tells this user's wallet from every other's in the run.
        let balances: ClosedRange<Int64>
        /// The users whose documents may show (an account shows the guests merged into it).
        var owners: Set<String>
    }

    /// A server declaring the sync fixture's collections, taking tokens of the local Apple stand-in, with the rate
    /// limits one device's 500 sign-ins would meet raised.
    static func with(_ body: @Sendable (TallyTestServer, DevAppleID) async throws -> Void) async throws {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        try await AppleIDStandIn.serving(clientId: clientId, clock: clock) { appleID, keysURL in
            let apple = try SignInWithAppleConfiguration(audiences: [clientId], keysURL: keysURL)
            try await TallyTestServer.with(configure: { configuration in
                configuration.sync.collections = SyncedClientFixture.serverCollections
                configuration.signInWithApple = apple
                let plenty = RateLimit(1_000_000, per: 60)
                configuration.limits.signInPerAddress = plenty
                configuration.limits.guestSignInsPerDevice = plenty
                configuration.limits.refreshPerSession = plenty
                configuration.limits.syncPushesPerUser = plenty
            }) { server in try await body(server, appleID) }
        }
    }

    @Test("500 changes of user on one client under two CPU burners: every call returns in time, and shows the new user's state only")
    func fiveHundredSwitches() async throws {
        try await Self.with { server, appleID in
            // The accounts: A (Apple, guests merge into it), B (Apple), E (email), each with a balance no other user has.
            let (subA, subB) = ("001234.switch-a", "001234.switch-b")
            let email = (address: "switch-e@example.com", password: "correct horse battery")
            let a = try await Self.appleAccount(server, appleID, sub: subA, grant: 500_000)
            let b = try await Self.appleAccount(server, appleID, sub: subB, grant: 2_000_000)
            let e = try await Self.emailAccount(server, email: email.address, password: email.password, grant: 3_000_000)

            let directory = SyncedClientFixture.directory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let (client, _, _) = server.syncedClient(directory: directory)
            let notes = client.collection("notes", of: Note.self)
            let watchdog = CallWatchdog()
            defer { watchdog.stop() }
            func call<T>(_ name: String, _ index: Int, _ body: () async throws -> T) async throws -> T {
                try await watchdog.call("\(name) at change \(index)", limit: Self.callLimit, body)
            }

            // Observers that live through every change: the wallet (observed, so an invalidation refetches it in the
            // background) and the sync status.
            let walletStates = Task {
                for await _ in client.observe(client.walletQuery) {}
            }
            let statuses = Task {
                for await _ in client.syncStatusChanges {}
            }
            defer {
                walletStates.cancel()
                statuses.cancel()
            }

            var current = try await call("first guest sign-in", 0) { try await client.signInAsGuest() }.userId
            var expected = Expected(userId: current, balances: 0...0, owners: [current])
            var mergedIntoA: Set<String> = []
            var documentsObserver = Self.observe(notes)
            let burners = CPUBurners(count: 2)
            defer { burners.stop() }
            let started = ContinuousClock.now
            for index in 1...Self.switches {
                // Work in flight for the user about to leave: a write to push, a background refetch of the wallet. (Each
                // user keeps one note, "n", so that the work of a change does not grow with the run; an account grows by
                // the copy of each guest's note merged into it.)
                try notes.put(id: "n", Note(date: "2027-01-01", text: "\(current) \(index)"))
                client.invalidate(key: client.walletQuery.key)

                switch index % 4 {
                case 1:  // sign-out, then the device's guest (a new one: the last was merged into A)
                    try await call("signOut", index) { try await client.signOut(discardingPendingWrites: true) }
                    let guest = try await call("signInAsGuest", index) { try await client.signInAsGuest() }
                    expected = Expected(userId: guest.userId, balances: 0...0, owners: [guest.userId])
                case 2:  // the guest signs in with Apple to A: asked first (every fifth time: no `merge`), then merged
                    let guest = current
                    if index % 20 == 2 {
                        let refused = await #expect(throws: ClientError.self) {
                            try await call("signInWithApple declined", index) {
                                try await Self.signInWithApple(client, appleID, sub: subA, merge: nil)
                            }
                        }
                        #expect(refused?.code == .accountExists, "\(String(describing: refused))")
                    }
                    let merged = try await call("signInWithApple merging", index) {
                        try await Self.signInWithApple(client, appleID, sub: subA, merge: true)
                    }
                    #expect(merged.user.userId == a && merged.merged?.guestUserId == guest)
                    mergedIntoA.insert(guest)
                    expected = Expected(userId: a, balances: 500_000...999_999, owners: mergedIntoA.union([a]))
                case 3:  // sign-out, then Sign in with Apple to B with no guest signed in
                    try await call("signOut", index) { try await client.signOut(discardingPendingWrites: true) }
                    _ = try await call("signInWithApple", index) { try await Self.signInWithApple(client, appleID, sub: subB, merge: nil) }
                    expected = Expected(userId: b, balances: 2_000_000...2_999_999, owners: [b])
                default:  // email sign-in over B, without signing out first
                    _ = try await call("signIn(email:)", index) { try await client.signIn(email: email.address, password: email.password) }
                    expected = Expected(userId: e, balances: 3_000_000...3_999_999, owners: [e])
                }
                current = expected.userId

                // The leaving user's document observer has ended; the new user's starts.
                try await call("the previous user's document observer ending", index) { await documentsObserver.value }
                documentsObserver = Self.observe(notes)

                // The app's first calls, as the new user (whom the server knows by the wallet: no two users' balances meet).
                #expect(await client.user?.userId == expected.userId, "change \(index)")
                let documents = try await call("documents()", index) { try notes.documents() }
                let foreign = documents.filter { !Self.isOwned($0.value.text, by: expected) }
                #expect(foreign.isEmpty, "change \(index): another user's documents \(foreign.map(\.value.text))")
                let wallet = try await call("fetch wallet", index) { try await client.fetch(client.walletQuery, forceRefresh: true) }
                #expect(expected.balances.contains(wallet.balance), "change \(index): balance \(wallet.balance)")
                try notes.put(id: "n", Note(date: "2027-01-02", text: "\(current) \(index)"))
                try await call("sync.now", index) { try await client.sync.now() }
                let shown = client.value(client.walletQuery)?.balance
                #expect(shown.map(expected.balances.contains) == true, "change \(index): the cached wallet shows \(String(describing: shown))")
                if index % 50 == 0 { print("UserSwitchStressTests: \(index) changes in \(ContinuousClock.now - started); \(watchdog.summary)") }
            }
            let elapsed = ContinuousClock.now - started
            burners.stop()
            print("UserSwitchStressTests: \(Self.switches) changes of user in \(elapsed)")

            // Nothing of anyone is left working: the last user's document observer ends at sign-out, no background task runs.
            try await call("the last sign-out", Self.switches + 1) { try await client.signOut(discardingPendingWrites: true) }
            try await call("the last document observer ending", Self.switches + 1) { await documentsObserver.value }
            #expect(client.background.count == 0)
            #expect(SyncedClientFixture.documentFiles(directory).isEmpty, "\(SyncedClientFixture.documentFiles(directory))")
        }
    }

    // MARK: Helpers

    /// Whether a note's text (`"<user id> <change>"`) belongs to one of `expected`'s owners (an account also shows the
    /// notes of the guests merged into it).
    static func isOwned(_ text: String, by expected: Expected) -> Bool {
        guard let owner = text.split(separator: " ").first.map(String.init) else { return false }
        return expected.owners.contains(owner)
    }

    /// Follows the collection until the observation ends (the user leaves).
    static func observe(_ notes: SyncedCollection<Note>) -> Task<Void, Never> {
        let stream = notes.observe()
        return Task { for await _ in stream {} }
    }

    /// Signs `client` in with Apple as `sub`, with a fresh nonce and token.
    @discardableResult
    static func signInWithApple(_ client: Client, _ appleID: DevAppleID, sub: String, merge: Bool?) async throws -> SignInResult {
        let nonce = AppleSignInNonce()
        let token = try await appleID.identityToken(sub: sub, nonce: nonce.raw).identityToken
        return try await client.signInWithApple(identityToken: token, nonce: nonce, merge: merge)
    }

    /// A new account made by a guest signing in with Apple as `sub` (in place), granted `grant` tokens.
    static func appleAccount(_ server: TallyTestServer, _ appleID: DevAppleID, sub: String, grant: Int64) async throws -> String {
        let (client, _) = server.client()
        try await client.signInAsGuest()
        let account = try await signInWithApple(client, appleID, sub: sub, merge: nil).user.userId
        try await server.grant(grant, to: account)
        try await client.signOut()
        return account
    }

    /// A new account made by a guest linking `email`, granted `grant` tokens.
    static func emailAccount(_ server: TallyTestServer, email: String, password: String, grant: Int64) async throws -> String {
        let (client, _) = server.client()
        let account = try await client.signInAsGuest().userId
        try await client.link(email: email, password: password)
        try await server.grant(grant, to: account)
        try await client.signOut()
        return account
    }
}
