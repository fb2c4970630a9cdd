import Foundation
import HTTPTypes
import TallyAPI
import TallyServer
import Testing

/// A PostgreSQL outage under a live server, made by cutting a TCP proxy between the two (the real
/// `pg_ctl stop` of a whole cluster runs in `scripts/fault-run`): requests fail fast with 503 and
/// `Retry-After` while it lasts, `/ready` says not ready, and everything recovers by itself — with no
/// key left claimed and no account left gated — when the database returns.
@Suite("PostgreSQL outages")
struct DatabaseOutageTests {
    /// Outages are real time: a connection refused is a connection refused. Kept short.
    static let outage: Duration = .seconds(2)

    @Test("Requests answer 503 + Retry-After within 1 s during an outage, and everything recovers after it", .timeLimit(.minutes(2)))
    func outageFailsFastAndRecovers() async throws {
        let base = try postgresURL()
        let components = try #require(URLComponents(string: base), "TALLY_TEST_DATABASE_URL is not a URL")
        let host = try #require(components.host, "the proxy needs a TCP database URL, not \(base)")
        let proxy = try await DatabaseProxy(targetHost: host, targetPort: components.port ?? 5432)
        do {
            try await run(through: proxy)
            await proxy.stop()
        } catch {
            await proxy.stop()
            throw error
        }
    }

    private func run(through proxy: DatabaseProxy) async throws {
        try await LiveServer.with(.postgres, configure: { configuration in
            let database = try #require(configuration.databaseURL)
            var url = try #require(URLComponents(string: database))
            url.host = "127.0.0.1"
            url.port = proxy.port
            configuration.databaseURL = url.string
        }) { server in
            let api = server.connection()
            let user = try await api.newGuest(granted: 100)
            let before = try await api.send(.post, "/v1/actions/ai.query", token: user.accessToken, headers: [.idempotencyKey: "before"])
            #expect(before.status == .ok, "\(before.text)")

            await proxy.cut()
            let clock = ContinuousClock()
            let outageEnd = clock.now + Self.outage
            var answered = 0
            var slowest = Duration.zero
            var round = 0
            while clock.now < outageEnd {
                round += 1
                let requests: [(HTTPRequest.Method, String, HTTPFields)] = [
                    (.post, "/v1/actions/ai.query", [.idempotencyKey: "during"]),
                    (.get, "/v1/wallet", [:]),
                    (.post, "/v1/wallet/holds", [.idempotencyKey: "hold-\(round)"]),
                ]
                for (method, path, headers) in requests {
                    let start = clock.now
                    let response = try await api.send(
                        method, path, token: user.accessToken, raw: method == .post && path.hasSuffix("holds") ? #"{"amount":5,"ttlSeconds":60}"# : nil,
                        headers: headers)
                    let took = clock.now - start
                    slowest = max(slowest, took)
                    #expect(response.status == .serviceUnavailable, "\(method) \(path) during the outage: \(response.status) \(response.text)")
                    #expect(response.errorCode == "unavailable")
                    #expect(response.headers[.retryAfter].flatMap(Int.init).map { $0 >= 1 } == true, "Retry-After on \(path)")
                    answered += 1
                }
                let ready = try await api.send(.get, "/ready")
                #expect(ready.status == .serviceUnavailable, "/ready during the outage")
            }
            #expect(answered >= 6, "requests were made during the outage")
            #expect(slowest < .seconds(1), "every request answered within 1 s (slowest: \(slowest))")

            try await proxy.restore()
            let restored = clock.now
            // The same key that failed during the outage: not stuck in flight (no 409), applied exactly once.
            var recovered: APIResponse?
            while clock.now - restored < .seconds(5) {
                let response = try await api.send(.post, "/v1/actions/ai.query", token: user.accessToken, headers: [.idempotencyKey: "during"])
                if response.status == .ok {
                    recovered = response
                    break
                }
                #expect(response.status == .serviceUnavailable, "while recovering: \(response.status) \(response.text)")
                try await Task.sleep(for: .milliseconds(50))
            }
            let recoveredIn = clock.now - restored
            let first = try #require(recovered, "the server recovered within 5 s of the database's return")
            #expect(recoveredIn < .seconds(5))
            let replay = try await api.send(.post, "/v1/actions/ai.query", token: user.accessToken, headers: [.idempotencyKey: "during"])
            #expect(replay.status == .ok && replay.body == first.body && replay.headers[.idempotentReplayed] == "true")
            #expect(try await api.send(.get, "/ready").status == .ok)
            // Two charges of 3 (before, during-retried), nothing else: the holds refused during the outage left nothing.
            let wallet = try await api.wallet(user)
            #expect(wallet.balance == 100 - 3 - 3 && wallet.held == 0, "\(wallet)")
            try await api.expectBooksBalance(user)
            await api.close()
        }
    }
}
