import Foundation
import TallyAPI
import TallyTestKit
import Testing

@testable import TallyClient

/// `client.ai.daily` against a stand-in for the gateway: one request per generation and day, from memory or disk
/// until the generation's `expiresAt`, then a new one; refusals confirmed in the wallet.
@Suite("AI daily generations", .timeLimit(.minutes(1)))
struct AIClientDailyTests {
    static func generation(day: String, content: String, now: Date, expiresAt: Date) -> DailyGeneration {
        DailyGeneration(name: "todays_prediction", day: day, content: content, generatedAt: now, expiresAt: expiresAt)
    }

    @Test("A second call the same day makes no request, however long ago the first was; the next day's call does")
    func oncePerDay() async throws {
        let clock = ManualClock()
        let (client, server, _) = try await AIStubs.client(clock: clock)
        let today = Self.generation(day: "2027-01-15", content: "The stars align.", now: clock.now, expiresAt: clock.now.addingTimeInterval(3 * 3600))
        server.onDaily { _ in try AIStubServer.json(today) }
        #expect(try await client.ai.daily("todays_prediction", parameters: ["sign": "leo"]) == today)
        #expect(client.state(client.walletQuery).isStale)  // the first call of the day may have been charged: refetched where observed
        clock.advance(by: 2 * 3600)  // stale for observers (hourly), still today's
        #expect(try await client.ai.daily("todays_prediction", parameters: ["sign": "leo"]) == today)
        #expect(server.requests(to: "/v1/ai/daily/").map(\.path) == ["/v1/ai/daily/todays_prediction?sign=leo"])

        clock.advance(by: 3600)  // the user's midnight
        let tomorrow = Self.generation(
            day: "2027-01-16", content: "A quiet day.", now: clock.now, expiresAt: clock.now.addingTimeInterval(86_400))
        server.onDaily { _ in try AIStubServer.json(tomorrow) }
        #expect(try await client.ai.daily("todays_prediction", parameters: ["sign": "leo"]) == tomorrow)
        #expect(server.requests(to: "/v1/ai/daily/").count == 2)
    }

    @Test("Kept on disk: a relaunch the same day answers without a request")
    func persisted() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-ai-daily-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("cache.sqlite").path
        let clock = ManualClock()
        let today = Self.generation(day: "2027-01-15", content: "The stars align.", now: clock.now, expiresAt: clock.now.addingTimeInterval(3 * 3600))
        let (first, server, _) = try await AIStubs.client(clock: clock, cacheStore: try SQLiteCacheStore(path: path))
        server.onDaily { _ in try AIStubServer.json(today) }
        #expect(try await first.ai.daily("todays_prediction") == today)

        let (relaunched, otherServer, _) = try await AIStubs.client(clock: clock, cacheStore: try SQLiteCacheStore(path: path))
        #expect(try await relaunched.ai.daily("todays_prediction") == today)
        #expect(otherServer.requests(to: "/v1/ai/daily/").isEmpty)
        withExtendedLifetime(first) {}
    }

    @Test("A refusal confirms the server's wallet; the next call asks again")
    func refused() async throws {
        let (client, server, _) = try await AIStubs.client(retry: .none)
        let poor = Wallet(balance: 0, held: 0, version: 5)
        server.onDaily { _ in AIStubServer.error(402, .insufficientTokens, wallet: poor) }
        let refusal = await #expect(throws: ClientError.self) { try await client.ai.daily("todays_prediction") }
        #expect(refusal?.code == .insufficientTokens && client.value(client.walletQuery) == poor)
        server.onDaily { _ in AIStubServer.error(404, .notFound) }
        let unknown = await #expect(throws: ClientError.self) { try await client.ai.daily("todays_prediction") }
        #expect(unknown?.status == 404)
        #expect(server.requests(to: "/v1/ai/daily/").count == 2)
        await #expect(throws: ClientError.self) { try await client.ai.daily("") }
    }

    @Test("The name and parameters are escaped; parameters go in a stable order; the key is the name and the parameters")
    func paths() {
        let ai = Client(configuration: ClientConfiguration(baseURL: URL(string: "http://127.0.0.1:9")!, secureStore: MemorySecureStore())).ai
        let query = ai.dailyQuery("a/b c", parameters: ["sign": "leo & co", "lang": "é"])
        #expect(query.path == "/v1/ai/daily/a%2Fb%20c?lang=%C3%A9&sign=leo%20%26%20co")
        #expect(query.key == "ai.daily/a/b c?lang=%C3%A9&sign=leo%20%26%20co" && query.operation == "GET /v1/ai/daily/{name}")
        #expect(ai.dailyQuery("a/b c", parameters: ["lang": "é", "sign": "leo & co"]).key == query.key)
        #expect(ai.dailyQuery("todays_prediction").path == "/v1/ai/daily/todays_prediction")
        #expect(ai.dailyQuery("todays_prediction").key == "ai.daily/todays_prediction")
    }

    @Test("Other parameters are another generation: sign=virgo after sign=leo asks the server, and each is kept apart")
    func parametersAreTheKey() async throws {
        let clock = ManualClock()
        let (client, server, _) = try await AIStubs.client(clock: clock)
        let until = clock.now.addingTimeInterval(3 * 3600)
        let leo = Self.generation(day: "2027-01-15", content: "Leo: the stars align.", now: clock.now, expiresAt: until)
        let virgo = Self.generation(day: "2027-01-15", content: "Virgo: a quiet day.", now: clock.now, expiresAt: until)
        server.onDaily { request in try AIStubServer.json(request.path.hasSuffix("sign=virgo") ? virgo : leo) }
        #expect(try await client.ai.daily("todays_prediction", parameters: ["sign": "leo"]) == leo)
        #expect(try await client.ai.daily("todays_prediction", parameters: ["sign": "virgo"]) == virgo)
        #expect(try await client.ai.daily("todays_prediction", parameters: ["sign": "leo"]) == leo)
        #expect(try await client.ai.daily("todays_prediction", parameters: ["sign": "virgo"]) == virgo)
        #expect(server.requests(to: "/v1/ai/daily/").map(\.path) == [
            "/v1/ai/daily/todays_prediction?sign=leo", "/v1/ai/daily/todays_prediction?sign=virgo",
        ])
    }
}
