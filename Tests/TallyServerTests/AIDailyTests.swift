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
            // The provider sees the Tally user's opaque id, as for chat calls.
            #expect(try await upstream.lastRequest()?["user"] == .string(user.userId))
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

    @Test("Parameters are part of a generation's key: sign=virgo after sign=leo is its own generation, charged apart", arguments: StoreKind.allCases)
    func parametersAreTheKey(_ kind: StoreKind) async throws {
        try await AIGatewayTests.with(kind, catalog: Self.catalog, daily: [try Self.spec()]) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 20)
            let virgoPath = "/v1/ai/daily/todays_prediction?sign=virgo"
            let leo: DailyGeneration = try await api.send(.get, Self.path, token: user.accessToken).decode()
            let virgo: DailyGeneration = try await api.send(.get, virgoPath, token: user.accessToken).decode()
            #expect(virgo.content != leo.content, "virgo got leo's: \(virgo.content)")
            #expect(virgo.day == leo.day && virgo.expiresAt == leo.expiresAt)
            // Each again: the stored one, no model call, no charge.
            #expect(try await api.send(.get, Self.path, token: user.accessToken).decode(DailyGeneration.self) == leo)
            #expect(try await api.send(.get, virgoPath, token: user.accessToken).decode(DailyGeneration.self) == virgo)
            #expect(try await upstream.stats().completions == 2)
            let debits = try await api.allEntries(user).filter { $0.kind == "debit" }
            #expect(debits.map(\.amount) == [-5, -5])
            try await api.expectBooksBalance(user)
        }
    }

    @Test("A time-zone hop across two processes on one PostgreSQL gets the stored generation, charged once; the next starts when it ended")
    func timeZoneHopAcrossProcesses() async throws {
        let url = try postgresURL()
        try await DevLLMTests.with { upstream in
            try await ScratchDatabase.with(baseURL: url) { database in
                try await Self.server(database, upstream) { first in
                    try await Self.server(database, upstream) { second in
                        try await Self.hop(first, second, upstream)
                    }
                }
            }
        }
    }

    /// A server on `database` whose gateway calls `upstream` and offers ``spec()``.
    static func server<T: Sendable>(_ database: String, _ upstream: DevLLMClient, _ body: @Sendable (LiveServer) async throws -> T) async throws -> T {
        try await LiveServer.with(.postgres, catalog: Self.catalog, configure: { configuration in
            configuration.databaseURL = database
            // Processes that share a database share their signing key (README): a token of one works on the other.
            configuration.signingKeys = try SigningKeys(parsing: String(repeating: "k", count: 43))
            configuration.ai = AIConfiguration(
                upstream: AIUpstream(baseURL: "http://127.0.0.1:\(upstream.port)/v1", apiKey: DevLLMTests.key),
                models: [AIGatewayTests.model], dailyGenerations: [try Self.spec()])
        }, body)
    }

    /// Kiritimati (UTC+14) to Pago Pago (UTC-11), 25 hours back, the hop of the second attack run.
    private static func hop(_ first: LiveServer, _ second: LiveServer, _ upstream: DevLLMClient) async throws {
        let (a, b) = (first.connection(), second.connection())
        let user = try await a.newGuest(granted: 20)
        func generation(_ api: APIConnection) async throws -> DailyGeneration {
            let response = try await api.send(.get, Self.path, token: user.accessToken)
            #expect(response.status == .ok, "\(response.text)")
            return try response.decode()
        }
        func advance(_ seconds: TimeInterval) {
            first.clock.advance(by: seconds)
            second.clock.advance(by: seconds)
        }
        let start = first.clock.now  // 2027-01-15T08:00Z: 22:00 in Kiritimati, 21:00 the day before in Pago Pago
        #expect(try await a.send(.patch, "/v1/me", token: user.accessToken, json: UpdateMeRequest(timezone: "Pacific/Kiritimati")).status == .ok)
        let kiritimati = try await generation(a)
        #expect(kiritimati.day == "2027-01-15" && kiritimati.expiresAt == start.addingTimeInterval(2 * 3600))
        #expect(try await b.send(.patch, "/v1/me", token: user.accessToken, json: UpdateMeRequest(timezone: "Pacific/Pago_Pago")).status == .ok)
        // The other process has never served this user: it finds the open window in the database.
        #expect(try await generation(b) == kiritimati, "a second generation for Pago Pago's yesterday")
        #expect(try await generation(a) == kiritimati)
        #expect(try await upstream.stats().completions == 1)
        #expect(try await a.allEntries(user).filter { $0.kind == "debit" }.count == 1)

        // 10:30Z, 23:30 in Pago Pago: the next window starts when Kiritimati's ended (10:00Z) and runs to the first
        // Pago Pago midnight at least 24 hours later, 2027-01-16T11:00Z: never earlier than staying put would give.
        advance(2.5 * 3600)
        let pagoPago = try await generation(b)
        // Its day is the one it ends with: Pago Pago's 2027-01-15, as Kiritimati's was (the same prompt, so the same words).
        #expect(pagoPago.day == "2027-01-15" && pagoPago.expiresAt == start.addingTimeInterval(27 * 3600) && pagoPago.generatedAt > kiritimati.generatedAt)
        #expect(try await generation(a) == pagoPago)
        advance(24.5 * 3600 - 1)
        #expect(try await generation(a) == pagoPago)
        #expect(try await generation(b) == pagoPago)
        #expect(try await upstream.stats().completions == 2)
        advance(1)
        let next = try await generation(a)
        #expect(next.day == "2027-01-16" && next.expiresAt == start.addingTimeInterval(51 * 3600))
        #expect(try await generation(b) == next)
        #expect(try await upstream.stats().completions == 3)
        #expect(try await a.allEntries(user).filter { $0.kind == "debit" }.count == 3)
        try await a.expectBooksBalance(user)
        await a.close()
        await b.close()
    }
}
