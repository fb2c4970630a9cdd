import ExampleSupport
import Foundation
import OracleCore
import TallyClient
import Testing

/// The oracle against a real `tally serve`, a real `tally-dev dev-appstore` and a real `tally-dev dev-llm` (TALLY_BIN, TALLY_DEV_BIN): seeds
/// 002 and 004 without a backend of their own.
@Suite("Oracle", .serialized, .timeLimit(.minutes(2)))
@MainActor
struct OracleTests {
    static let config = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../tally.yaml").standardized

    /// A server selling through a dev App Store, and a started guest session on a fresh phone that buys from it,
    /// all removed afterwards.
    static func withSession(_ body: @MainActor (TallyServer, OracleSession, URL) async throws -> Void) async throws {
        try await withStore { server, _, session, home in try await body(server, session, home) }
    }

    /// ``withSession(_:)`` with the dev App Store, to play Apple's side.
    static func withStore(_ body: @MainActor (TallyServer, DevAppStore, OracleSession, URL) async throws -> Void) async throws {
        try await withModel { server, appStore, _, session, home in try await body(server, appStore, session, home) }
    }

    /// ``withStore(_:)`` with the local model the server's `ai:` section calls (tally.yaml's `vision`), wanting a key
    /// of its own, which the server reads from `ORACLE_LLM_KEY`.
    static func withModel(_ body: @MainActor (TallyServer, DevAppStore, DevLLM, OracleSession, URL) async throws -> Void) async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("oracle-tests-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: home) }
        let model = try await DevLLM(directory: home, apiKeyEnv: "ORACLE_LLM_KEY")
        let (server, appStore) = try await DevAppStore.startWithServer(
            config: config, directory: home, subscriptions: [OracleProduct.premium], devLLM: model)
        let session = OracleSession(
            client: try OracleSetup.client(server: server.baseURL, home: home.appendingPathComponent("phone")),
            storefront: DevAppStoreStorefront(url: appStore.baseURL))
        try await session.start()
        try await body(server, appStore, model, session, home)
        try await appStore.stop()
        try await server.stop()
        try await model.stop()
    }

    /// Waits (polling every 10 ms, at most 20 s: the change comes from another process, and a stream that had to
    /// reconnect waits the server's `retry:` of 2–5 s first) until `condition` holds.
    static func eventually(_ condition: @MainActor () -> Bool) async throws {
        for _ in 0..<2_000 where !condition() { try await Task.sleep(for: .milliseconds(10)) }
    }

    static func synced(_ client: Client) async {
        for await status in client.syncStatusChanges where status.pendingMutations == 0 && !status.isSyncing && status.lastSyncedAt != nil { return }
    }

    static func userId(_ session: OracleSession) async throws -> String {
        try #require(await session.client.user?.userId)
    }

    @Test("A guest gets three free readings a day, is refused the fourth with nothing charged, and pays 5 tokens once it has them")
    func freeReadingsThenTokens() async throws {
        try await Self.withSession { server, session, _ in
            for left in [2, 1, 0] {
                #expect(try await session.drawReading() != nil)
                #expect(session.freeReadingsLeft == left)
            }
            #expect(try await session.drawReading() == nil)
            #expect(session.notice?.contains("free readings") == true && session.wallet?.balance == 0)
            try await server.grant(7, to: try await Self.userId(session))
            #expect(try await session.drawReading() != nil)
            #expect(session.wallet?.balance == 2 && session.freeReadingsLeft == 0)
        }
    }

    @Test("Each chat exchange costs 1 token on the server; without tokens it is rolled back and the user told")
    func chatIsMeteredPerMessage() async throws {
        try await Self.withSession { server, session, _ in
            let follower = Task { await session.follow() }
            defer { follower.cancel() }
            try await server.grant(2, to: try await Self.userId(session))
            let base = Date(timeIntervalSince1970: 1_800_000_000)
            try session.ask("One?", at: base)
            try session.ask("Two?", at: base.addingTimeInterval(1))
            // Both are paid for, so nothing can take them back: each shows the moment it is asked.
            #expect(session.history.map(\.question) == ["One?", "Two?"], "shown at once")
            // One token short: shown too, until the server refuses it. Its refusal may come back before the next
            // line on a loaded machine (the sync engine pushes on its own thread), so it is not counted here.
            try session.ask("Three?", at: base.addingTimeInterval(2))
            await Self.synced(session.client)
            for _ in 0..<300 where session.notice == nil || session.history.count != 2 { try await Task.sleep(for: .milliseconds(10)) }
            #expect(session.history.map(\.question) == ["One?", "Two?"])
            #expect(session.notice?.contains("Out of tokens") == true)
            let wallet = try await session.client.fetch(session.client.walletQuery, forceRefresh: true)
            #expect(wallet.balance == 0)
        }
    }

    @Test("A reinstall (a fresh phone, the same account after sign-in) restores the whole history")
    func reinstallRestoresHistory() async throws {
        try await Self.withSession { server, session, home in
            try await server.grant(10, to: try await Self.userId(session))
            let base = Date(timeIntervalSince1970: 1_800_000_000)
            for index in 0..<5 { try session.ask("Question \(index)?", at: base.addingTimeInterval(Double(index))) }
            await Self.synced(session.client)
            try await session.keepAccount(email: "reinstall@example.com", password: "moon and stars")
            let phone = OracleSession(client: try OracleSetup.client(server: server.baseURL, home: home.appendingPathComponent("new-phone")))
            _ = try await phone.client.signIn(email: "reinstall@example.com", password: "moon and stars")
            await Self.synced(phone.client)
            try phone.reload()
            #expect(phone.history == session.history && phone.history.count == 5)
        }
    }

    @Test("A purchase recorded on the server shows in the wallet from the event stream, without the app asking")
    func walletFollowsTheServer() async throws {
        try await Self.withSession { server, session, _ in
            let follower = Task { await session.follow() }
            defer { follower.cancel() }
            await Self.synced(session.client)
            try await server.grant(42, to: try await Self.userId(session))
            for _ in 0..<500 where session.wallet?.balance != 42 { try await Task.sleep(for: .milliseconds(10)) }
            #expect(session.wallet?.balance == 42)
        }
    }

    @Test("100 tokens bought show in the wallet as soon as the purchase returns, with no refresh")
    func buyTokensShowsAtOnce() async throws {
        try await Self.withSession { _, session, _ in
            let purchase = try await session.buyTokens()
            #expect(session.wallet?.balance == 100 && session.wallet?.available == 100, "from the server's answer")
            #expect(purchase.purchase.productId == OracleProduct.tokens100 && purchase.purchase.tokens == 100)
            #expect(session.notice == nil)
            let onServer = try await session.client.fetch(session.client.walletQuery, forceRefresh: true)
            #expect(onServer.balance == 100)
        }
    }

    @Test("A refund after spending leaves the wallet below zero on the open screen: a paid reading is refused, charging nothing, a free one still given")
    func refundGoesNegative() async throws {
        try await Self.withStore { _, appStore, session, _ in
            let follower = Task { await session.follow() }
            defer { follower.cancel() }
            for _ in 0..<2 { #expect(try await session.drawReading() != nil) }
            let purchase = try await session.buyTokens()
            let base = Date(timeIntervalSince1970: 1_800_000_000)
            for index in 0..<3 { try session.ask("Question \(index)?", at: base.addingTimeInterval(Double(index))) }
            await Self.synced(session.client)
            try await Self.eventually { session.wallet?.balance == 97 }
            #expect(session.wallet?.balance == 97, "3 chat messages at 1 token")

            try await appStore.waitUntilDelivered(try await appStore.refund(purchase.purchase.transactionId))
            try await Self.eventually { session.wallet?.balance == -3 }
            #expect(session.wallet?.balance == -3, "the refund takes back all 100, shown from the server's event")

            #expect(try await session.drawReading() != nil, "the day's third free reading")
            #expect(session.freeReadingsLeft == 0 && session.wallet?.balance == -3)
            #expect(try await session.drawReading() == nil, "a paid reading is refused")
            #expect(session.notice != nil && session.wallet?.balance == -3)
            let onServer = try await session.client.fetch(session.client.walletQuery, forceRefresh: true)
            #expect(onServer.balance == -3, "nothing charged")
        }
    }

    @Test("A subscription gives unlimited readings at once, charging nothing; when it expires, three free a day again")
    func subscriptionThenExpiry() async throws {
        try await Self.withStore { _, appStore, session, _ in
            let follower = Task { await session.follow() }
            defer { follower.cancel() }
            let subscription = try await session.subscribe()
            #expect(session.isPremium && session.freeReadingsLeft == nil, "from the server's answer")
            #expect(subscription.purchase.kind == .subscription)
            for _ in 0..<5 { #expect(try await session.drawReading() != nil) }
            #expect(session.wallet?.balance == 0 && session.freeReadingsLeft == nil && session.notice == nil)

            try await appStore.waitUntilDelivered(try await appStore.expire(subscription.purchase.transactionId))
            try await Self.eventually { !session.isPremium && session.freeReadingsLeft == 3 }
            #expect(!session.isPremium && session.freeReadingsLeft == 3, "the readings under premium were not counted")
            for left in [2, 1, 0] {
                #expect(try await session.drawReading() != nil)
                #expect(session.freeReadingsLeft == left)
            }
            #expect(try await session.drawReading() == nil, "the fourth of the day is refused")
            #expect(session.wallet?.balance == 0)
        }
    }
}
