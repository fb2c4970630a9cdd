import ExampleSupport
import Foundation
import OracleCore
import TallyClient
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sign in with Apple in the oracle, against a real `tally serve` and a real `tally-dev dev-appstore` playing both the App
/// Store and Apple's sign-in (issue 34): a reinstall's guest merged into the account it turns out to have.
@Suite("Oracle: Sign in with Apple", .serialized, .timeLimit(.minutes(2)))
@MainActor
struct AppleSignInTests {
    /// The session the SDK keeps in a phone's secure store (`home/session`), to try the guest's tokens after the merge
    /// as a copy of the old app would.
    struct StoredSession: Decodable {
        var accessToken: String?
        var refreshToken: String
    }

    static func storedSession(_ home: URL) throws -> StoredSession {
        let data = try #require(try FileSecureStore(directory: home.appendingPathComponent("session")).read("session"))
        return try JSONDecoder().decode(StoredSession.self, from: data)
    }

    /// The status `server` answers `path` (a GET with `accessToken`, or a POST of `body`).
    static func status(_ server: TallyServer, _ path: String, accessToken: String? = nil, body: String? = nil) async throws -> Int {
        var request = URLRequest(url: server.baseURL.appendingPathComponent(path))
        if let accessToken { request.setValue("Bearer \(accessToken)", forHTTPHeaderField: "Authorization") }
        if let body {
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(body.utf8)
        }
        let (_, response) = try await URLSession.shared.data(for: request)
        return try #require(response as? HTTPURLResponse).statusCode
    }

    /// Signs `session` in with Apple as Apple user `sub`: a new nonce, the identity token the stand-in mints for it.
    static func signInWithApple(_ session: OracleSession, sub: String, _ appStore: DevAppStore) async throws -> SignInResult? {
        let nonce = AppleSignInNonce()
        let credential = try await appStore.identityToken(sub: sub, nonce: nonce.raw)
        return try await session.signInWithApple(
            identityToken: credential.identityToken, nonce: nonce, authorizationCode: credential.authorizationCode)
    }

    @Test("A reinstall starts as a new guest, buys a reading, signs in with Apple to the earlier account and brings it in: the history, both wallets' tokens and the new reading are all there")
    func reinstallMergesIntoTheAppleAccount() async throws {
        try await OracleTests.withStore { server, appStore, phone, home in
            let sub = "001234.\(UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")).0421"
            let base = Date(timeIntervalSince1970: 1_800_000_000)

            // The first phone: its guest signs in with a new Apple ID and becomes that account in place.
            let accountId = try await OracleTests.userId(phone)
            let first = try #require(try await Self.signInWithApple(phone, sub: sub, appStore))
            #expect(first.user.userId == accountId && !first.user.isGuest && first.merged == nil, "the same user id")
            // Two readings (free), 100 tokens bought, three questions (1 token each).
            for index in 0..<2 { #expect(try await phone.drawReading(at: base.addingTimeInterval(Double(index))) != nil) }
            try await phone.buyTokens()
            for index in 0..<3 { try phone.ask("Question \(index)?", at: base.addingTimeInterval(10 + Double(index))) }
            await OracleTests.synced(phone.client)
            #expect(try await phone.client.fetch(phone.client.walletQuery, forceRefresh: true).balance == 97)
            let history = phone.history
            #expect(history.map(\.question) == ["Question 0?", "Question 1?", "Question 2?"])
            #expect(phone.readings.count == 2)

            // The reinstall: a new phone (empty storage, a new installation), a new guest with nothing.
            let reinstalled = home.appendingPathComponent("reinstalled-phone")
            let again = OracleSession(
                client: try OracleSetup.client(server: server.baseURL, home: reinstalled), storefront: DevAppStoreStorefront(url: appStore.baseURL))
            try await again.start()
            let guestId = try await OracleTests.userId(again)
            #expect(guestId != accountId && again.history.isEmpty && again.readings.isEmpty)
            // Its three free readings, a fourth refused, 100 tokens bought, the fourth bought for 5.
            for index in 0..<3 { #expect(try await again.drawReading(at: base.addingTimeInterval(100 + Double(index))) != nil) }
            #expect(try await again.drawReading() == nil && again.wallet?.balance == 0)
            try await again.buyTokens()
            let bought = try #require(try await again.drawReading(at: base.addingTimeInterval(103)))
            #expect(again.wallet?.balance == 95 && again.freeReadingsLeft == 0)
            await OracleTests.synced(again.client)
            let newReadings = again.readings
            #expect(newReadings.count == 4 && newReadings.last?.card == bought)
            let guest = try Self.storedSession(reinstalled)

            // Signing in with the same Apple ID: the server answers account_exists with what the guest would bring,
            // the app asks the user, who says yes.
            var asked: [GuestProgress] = []
            again.confirmMerge = { progress in
                asked.append(progress)
                return true
            }
            let merged = try #require(try await Self.signInWithApple(again, sub: sub, appStore))
            #expect(asked == [GuestProgress(balance: 95, documents: 4, purchases: 1)], "asked once, with the guest's progress")
            #expect(merged.user.userId == accountId && !merged.user.isGuest, "the earlier account")
            let summary = try #require(merged.merged)
            #expect(summary.guestUserId == guestId && summary.tokensMoved == 95 && summary.purchasesMoved == 1)
            #expect(summary.documentsMoved == 4 && summary.conflicts.isEmpty && summary.holdsReleased == 0)

            // On the reinstalled phone: the account's tokens and the guest's, the day's readings as the larger count
            // (3, not 2 + 3), the earlier history and readings with the new ones.
            #expect(again.wallet?.balance == 192 && again.wallet?.available == 192, "97 + 95")
            #expect(again.freeReadingsLeft == 0)
            let readingsQuota = try await again.client.fetch(again.client.quotasQuery, forceRefresh: true).items.first { $0.name == "readings" }
            #expect(readingsQuota?.used == 3, "the larger of the day's counts, not 2 + 3")
            try await OracleTests.eventually { (try? again.reload()) != nil && again.history.count == 3 && again.readings.count == 6 }
            #expect(again.history == history, "the earlier history")
            #expect(again.readings == phone.readings + newReadings, "the earlier readings, then the four of the reinstall")
            let purchases = try await again.client.purchases.list().items
            #expect(purchases.map(\.productId) == [OracleProduct.tokens100, OracleProduct.tokens100])
            var newest: LedgerEntry?
            for try await page in again.client.ledgerPages(pageSize: 1) {
                newest = page.first
                break
            }
            #expect(newest?.kind == "merge_in" && newest?.amount == 95 && newest?.balanceAfter == 192, "the guest's tokens, one entry")

            // The first phone sees the same account: the tokens and the new readings.
            #expect(try await phone.client.fetch(phone.client.walletQuery, forceRefresh: true).balance == 192)
            await OracleTests.synced(phone.client)
            try await OracleTests.eventually { (try? phone.reload()) != nil && phone.readings.count == 6 }
            #expect(phone.readings == again.readings)

            // The guest's session ended: its access token and its refresh token are refused.
            #expect(try await Self.status(server, "v1/wallet", accessToken: try #require(guest.accessToken)) == 401)
            #expect(try await Self.status(server, "v1/auth/refresh", body: #"{"refreshToken":"\#(guest.refreshToken)"}"#) == 401)
        }
    }

    @Test("A user who says no keeps the reinstall's guest as it was: nothing moved, the account untouched")
    func declinedMergeKeepsTheGuest() async throws {
        try await OracleTests.withStore { server, appStore, phone, home in
            let sub = "001234.\(UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")).0422"
            _ = try #require(try await Self.signInWithApple(phone, sub: sub, appStore))
            let accountId = try await OracleTests.userId(phone)
            try await server.grant(10, to: accountId)

            let again = OracleSession(
                client: try OracleSetup.client(server: server.baseURL, home: home.appendingPathComponent("reinstalled-phone")),
                storefront: DevAppStoreStorefront(url: appStore.baseURL))
            try await again.start()
            let guestId = try await OracleTests.userId(again)
            try await again.buyTokens()
            var asked: [GuestProgress] = []
            again.confirmMerge = { progress in
                asked.append(progress)
                return false
            }
            #expect(try await Self.signInWithApple(again, sub: sub, appStore) == nil)
            #expect(asked == [GuestProgress(balance: 100, documents: 0, purchases: 1)])
            let user = await again.client.user
            #expect(user?.userId == guestId && user?.isGuest == true)
            #expect(try await again.client.fetch(again.client.walletQuery, forceRefresh: true).balance == 100)
            #expect(try await phone.client.fetch(phone.client.walletQuery, forceRefresh: true).balance == 10)
        }
    }
}
