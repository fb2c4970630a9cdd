import Foundation
import TallyAPI
import TallyDevLLM
@testable import TallyServer
import TallyStore
import Testing

/// What a merge moves, through the real HTTP stack on both stores (issue 43): AI answers streaming while their guest is
/// merged are charged to the account, at most what they held; bought, granted and earned tokens travel with a guest,
/// its sign-up grant does not.
@Suite("Merges move value, not grants, and charge what was answered", .timeLimit(.minutes(4)))
struct MergeValueTests {
    static let email = "merge-value@example.com"
    static let password = "correct horse 1"

    /// Makes an account (a guest that links an email) and returns it.
    static func account(_ api: APIConnection, deviceId: String = "device-" + UUID().uuidString) async throws -> TestUser {
        let owner = try await api.newGuest(deviceId: deviceId)
        let linked = try await api.send(.post, "/v1/auth/link", token: owner.accessToken, json: CredentialsRequest(email: email, password: password))
        #expect(linked.status == .ok, "\(linked.text)")
        return owner
    }

    /// Signs in to the account from `guest`'s session, merging it; the summary.
    static func merge(_ api: APIConnection, _ guest: TestUser) async throws -> MergeSummary {
        let answer = try await api.send(
            .post, "/v1/auth/sign-in", token: guest.accessToken, json: CredentialsRequest(email: email, password: password, merge: true))
        #expect(answer.status == .ok, "\(answer.text)")
        return try #require(try answer.decode(SessionTokens.self).merged)
    }

    @Test("Two AI streams in flight when their guest is merged are captured from the account, each at most its hold (failed before: both free)",
        arguments: StoreKind.allCases)
    func streamsAcrossAMerge(_ kind: StoreKind) async throws {
        try await AIGatewayTests.with(kind) { server, upstream in
            let api = server.connection()
            let account = try await Self.account(api)
            let guest = try await api.newGuest(granted: 10_000)
            try await upstream.script([DevBehaviour(pauseAfterChunks: 3), DevBehaviour(pauseAfterChunks: 3)])
            var streams: [EventStreamClient] = []
            for text in ["Tell me about the stars", "Tell me about the sea"] {
                let (stream, head) = try await EventStreamClient.open(
                    port: server.port, token: guest.accessToken, path: "/v1/ai/chat/completions",
                    json: Array(try JSONEncoder().encode(AIGatewayTests.chat(text, stream: true))))
                #expect(head.status == 200)
                var seen = 0
                while seen < 2 { if case .event = try await stream.nextEvent() { seen += 1 } }
                streams.append(stream)
            }
            let held = try AIGatewayTests.bound("Tell me about the stars").maxCost + AIGatewayTests.bound("Tell me about the sea").maxCost
            #expect(try await api.wallet(guest).held == held)

            let summary = try await Self.merge(api, guest)
            #expect(summary.tokensMoved == 10_000 && summary.holdsMoved == 2 && summary.holdsReleased == 0, "\(summary)")
            let during = try await api.wallet(account)
            #expect(during.balance == 10_000 && during.held == held, "the holds are the account's now: \(during)")

            #expect(try await upstream.release() == 2)
            for stream in streams {
                while true {
                    let item = try await stream.next()
                    if item == .end { break }
                }
                await stream.close()
            }
            let after = try await AIGatewayTests.settled(api, account)
            #expect(after.held == 0)
            let entries = try await api.allEntries(account)
            let captures = entries.filter { $0.kind == "capture" }
            #expect(captures.count == 2, "\(entries.map(\.kind))")
            let charged = captures.reduce(Int64(0)) { $0 - $1.amount }
            #expect(charged > 0 && charged <= held && after.balance == 10_000 - charged, "charged \(charged) of \(held) held: \(after)")
            try await api.expectBooksBalance(account)
            try await api.expectAdminBooks(guest.userId, balance: 0)
        }
    }

    @Test("Ten guests on one device merged one after another into an account bring none of their sign-up grants; what a guest was granted or bought travels, its grant counted as spent first (failed before: 100 became 1,100)",
        arguments: StoreKind.allCases)
    func grantsStay(_ kind: StoreKind) async throws {
        let catalog = try Catalog(signupGrant: 100, quotas: [], actions: [ActionSpec(name: "reading", tokens: 10)])
        try await LiveServer.with(kind, catalog: catalog) { server in
            let api = server.connection()
            let device = "device-" + UUID().uuidString
            let account = try await Self.account(api)
            #expect(try await api.wallet(account).balance == 100)
            for round in 0..<10 {
                let guest = try await api.newGuest(deviceId: device)
                #expect(guest.userId != account.userId)
                var expected: Int64 = 0
                if round == 0 {
                    // Earned 50 (an operator's grant), spent 30: 120 left, 70 of them what is left of the grant.
                    try await api.grant(50, to: guest)
                    for _ in 0..<3 {
                        let read = try await api.send(.post, "/v1/actions/reading", token: guest.accessToken, headers: [.idempotencyKey: UUID().uuidString])
                        #expect(read.status == .ok, "\(read.text)")
                    }
                    expected = 50
                }
                let summary = try await Self.merge(api, guest)
                #expect(summary.tokensMoved == expected && summary.signupGrantLeft == (round == 0 ? 70 : 100), "round \(round): \(summary)")
                try await api.expectAdminBooks(guest.userId, balance: round == 0 ? 70 : 100)
            }
            #expect(try await api.wallet(account).balance == 150, "the account's own 100 and the 50 earned, not ten grants")
            try await api.expectBooksBalance(account)
        }
    }
}
