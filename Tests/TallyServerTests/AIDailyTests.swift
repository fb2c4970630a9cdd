import Foundation
import HTTPTypes
import TallyAPI
import TallyDevLLM
@testable import TallyServer
import TallyStore
import Testing

/// Daily generations: once per user and local day, charged once, the same for every caller, on both stores and
/// across two server processes.
@Suite("AI daily generations", .timeLimit(.minutes(3)))
struct AIDailyTests {
    static let catalog = try! Catalog(signupGrant: 0, quotas: [], actions: [ActionSpec(name: "ai.daily", tokens: 5)])
    static let prompt = "A one-line prediction for {{sign}} on {{date}}."

    static func spec() throws -> DailyGenerationSpec {
        DailyGenerationSpec(
            name: "todays_prediction", model: AIGatewayTests.model,
            prompt: try PromptTemplate(prompt, params: ["sign"], hasProfile: false, place: "test"),
            action: catalog.action(named: "ai.daily")!, quotaLimit: nil, params: ["sign"], profileDocument: nil)
    }

    static let path = "/v1/ai/daily/todays_prediction?sign=leo"

    @Test("1,000 concurrent first calls make one upstream call and one charge, and all get the same generation", arguments: StoreKind.allCases)
    func thousandFirstCalls(_ kind: StoreKind) async throws {
        try await AIGatewayTests.with(kind, catalog: Self.catalog, daily: [try Self.spec()], connectionsPerIP: 2_000) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 20)
            let bodies = try await concurrently(1_000, server: server) { _, connection in
                let response = try await connection.send(.get, Self.path, token: user.accessToken)
                return "\(response.status.code) \(response.text)"
            }
            #expect(Set(bodies).count == 1 && bodies[0].hasPrefix("200 "), "\(Set(bodies).prefix(3))")
            #expect(try await upstream.stats().completions == 1)
            let debits = try await api.allEntries(user).filter { $0.kind == "debit" }
            #expect(debits.count == 1 && debits.first?.amount == -5)
            try await api.expectBooksBalance(user)
        }
    }

    @Test("The generation is kept for the local day and replaced after the user's local midnight", arguments: StoreKind.allCases)
    func replacedAfterLocalMidnight(_ kind: StoreKind) async throws {
        try await AIGatewayTests.with(kind, catalog: Self.catalog, daily: [try Self.spec()]) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 20)
            // 2027-01-15T08:00Z is 17:00 in Tokyo: the local day ends at 15:00Z.
            #expect(try await api.send(.patch, "/v1/me", token: user.accessToken, json: UpdateMeRequest(timezone: "Asia/Tokyo")).status == .ok)
            let first: DailyGeneration = try await api.send(.get, Self.path, token: user.accessToken).decode()
            #expect(first.day == "2027-01-15" && first.expiresAt == Date(timeIntervalSince1970: 1_800_000_000 + 7 * 3600))
            server.clock.advance(by: 6 * 3600 + 59 * 60)
            let later: DailyGeneration = try await api.send(.get, Self.path, token: user.accessToken).decode()
            #expect(later == first)
            #expect(try await upstream.stats().completions == 1)
            server.clock.advance(by: 61)
            let next: DailyGeneration = try await api.send(.get, Self.path, token: user.accessToken).decode()
            #expect(next.day == "2027-01-16" && next.content != first.content)
            #expect(try await upstream.stats().completions == 2)
            #expect(try await api.allEntries(user).filter { $0.kind == "debit" }.count == 2)
        }
    }

    @Test("A failed generation charges nothing and the next call tries again; one that cannot be paid never calls the model", arguments: StoreKind.allCases)
    func failuresChargeNothing(_ kind: StoreKind) async throws {
        try await AIGatewayTests.with(kind, catalog: Self.catalog, daily: [try Self.spec()]) { server, upstream in
            let api = server.connection()
            let poor = try await api.newGuest()
            let refused = try await api.send(.get, Self.path, token: poor.accessToken)
            #expect(refused.status.code == 402 && refused.text.contains("\"wallet\""), "\(refused.text)")
            #expect(try await upstream.stats().completions == 0)

            let user = try await api.newGuest(granted: 20)
            try await upstream.script([DevBehaviour(status: 500)])
            #expect(try await api.send(.get, Self.path, token: user.accessToken).status == .badGateway)
            #expect(try await api.wallet(user).balance == 20)
            #expect(try await api.send(.get, Self.path, token: user.accessToken).status == .ok)
            #expect(try await api.wallet(user).balance == 15)
            #expect(try await api.send(.get, "/v1/ai/daily/todays_prediction", token: user.accessToken).status == .badRequest)
            #expect(try await api.send(.get, "/v1/ai/daily/nope?sign=leo", token: user.accessToken).status == .notFound)
        }
    }

    @Test("Two server processes on one PostgreSQL: 1,000 concurrent first calls split between them make one upstream call and one charge")
    func twoProcesses() async throws {
        let url = try postgresURL()
        try await DevLLMTests.with { upstream in
            try await ScratchDatabase.with(baseURL: url) { database in
                let config = """
                    signupGrant: 0
                    quotas: []
                    actions: [{name: ai.daily, tokens: 5}]
                    ai:
                      upstream: {baseURL: "http://127.0.0.1:\(upstream.port)/v1", apiKeyEnv: AI_TEST_KEY}
                      models: [{name: chat, upstreamModel: dev, promptTokensPerCredit: 10, completionTokensPerCredit: 5, maxCompletionTokens: 40}]
                      dailyGenerations: [{name: todays_prediction, model: chat, prompt: "\(Self.prompt)", params: [sign], action: ai.daily}]
                    """
                try await ServerPair.with(url: database, config: config, extraEnvironment: ["AI_TEST_KEY": DevLLMTests.key],
                    arguments: ["--max-connections-per-ip", "2000", "--backlog", "2000"]
                ) { pair in
                    let api = pair.connection(0)
                    let user = try await api.newGuest(granted: 20)
                    let bodies = try await concurrently(1_000, connect: { pair.connection($0 % 2) }) { _, connection in
                        let response = try await connection.send(.get, Self.path, token: user.accessToken)
                        return "\(response.status.code) \(response.text)"
                    }
                    #expect(Set(bodies).count == 1 && bodies[0].hasPrefix("200 "), "\(Set(bodies).prefix(3))")
                    #expect(try await upstream.stats().completions == 1)
                    #expect(try await api.allEntries(user).filter { $0.kind == "debit" }.count == 1)
                }
            }
        }
    }
}
