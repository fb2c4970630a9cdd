import ExampleSupport
import Foundation
import OracleCore
import TallyClient
import Testing

/// The oracle against a real `tally serve` (TALLY_BIN): seeds 002 and 004 without a backend of their own.
@Suite("Oracle", .serialized, .timeLimit(.minutes(2)))
@MainActor
struct OracleTests {
    static let config = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../tally.yaml").standardized

    /// A server and a started guest session on a fresh phone, both removed afterwards.
    static func withSession(_ body: @MainActor (TallyServer, OracleSession, URL) async throws -> Void) async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("oracle-tests-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: home) }
        let server = try await TallyServer(config: config, dataDirectory: home.appendingPathComponent("server"))
        let session = OracleSession(client: try OracleSetup.client(server: server.baseURL, home: home.appendingPathComponent("phone")))
        try await session.start()
        try await body(server, session, home)
        try await server.stop()
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
            for (index, question) in ["One?", "Two?", "Three?"].enumerated() {
                try session.ask(question, at: base.addingTimeInterval(Double(index)))
            }
            #expect(session.history.count == 3, "shown at once")
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
}
