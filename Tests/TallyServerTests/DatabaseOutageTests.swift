import Foundation
import HTTPTypes
import TallyAPI
import TallyDevLLM
import TallyPostgres
@testable import TallyServer
import TallyTestSupport
import Testing

/// A PostgreSQL outage under a live server, made by cutting a TCP proxy between the two (the real
/// `pg_ctl stop` of a whole cluster runs in `scripts/fault-run`): requests fail fast with 503 and
/// `Retry-After` while it lasts, `/ready` says not ready, and everything recovers by itself — with no
/// key left claimed and no account left gated — when the database returns.
@Suite("PostgreSQL outages", .timeLimit(.minutes(10)))
struct DatabaseOutageTests {
    /// Outages are real time: a connection refused is a connection refused. Kept short: the least an outage lasts
    /// (long enough for the pool's reconnect backoff to reach its 1 s cap before the database returns).
    static let outage: Duration = .seconds(2)
    /// The fewest rounds of requests made during an outage, however slowly a loaded machine runs them.
    static let outageRounds = 3
    /// The lease timeout of the outage test's server: production's (the tests' servers otherwise wait 30 s). A request
    /// that waits in line for a connection while the database is down is failed by the lease timeout at the latest, the
    /// pool's longest wait; one stuck on a statement only by the maximum lease (30 s), longer still. (Connects are
    /// refused at once here: the proxy no longer listens.)
    static let leaseTimeout = PostgresPool.Configuration.defaultAcquireTimeout

    @Test("Requests answer 503 + Retry-After during an outage without waiting out the lease timeout, and everything recovers after it", .timeLimit(.minutes(2)))
    func outageFailsFastAndRecovers() async throws {
        try await Self.withProxy { proxy in try await run(through: proxy) }
    }

    /// Runs `body` with a proxy in front of the test PostgreSQL, stopped after.
    private static func withProxy(_ body: (OutageProxy) async throws -> Void) async throws {
        let base = try postgresURL()
        let components = try #require(URLComponents(string: base), "TALLY_TEST_DATABASE_URL is not a URL")
        let host = try #require(components.host, "the proxy needs a TCP database URL, not \(base)")
        let proxy = try await OutageProxy(targetHost: host, targetPort: components.port ?? 5432)
        do {
            try await body(proxy)
            await proxy.stop()
        } catch {
            await proxy.stop()
            throw error
        }
    }

    /// `configuration`'s database reached through `proxy`.
    private static func through(_ proxy: OutageProxy, _ configuration: inout TallyConfiguration) throws {
        let database = try #require(configuration.databaseURL)
        var url = try #require(URLComponents(string: database))
        url.host = "127.0.0.1"
        url.port = proxy.port
        configuration.databaseURL = url.string
    }

    @Test("A stream that finishes during an outage is charged after it, once: when the database returns before its hold expires, and after housekeeping released the expired hold whole", .timeLimit(.minutes(3)))
    func streamFinishedDuringAnOutageIsChargedAfterIt() async throws {
        try await Self.withProxy { proxy in
            try await DevLLMTests.with { upstream in
                try await LiveServer.with(.postgres, configure: { configuration in
                    try Self.through(proxy, &configuration)
                    configuration.ai = AIConfiguration(
                        upstream: AIUpstream(baseURL: "http://127.0.0.1:\(upstream.port)/v1", apiKey: DevLLMTests.key), models: [AIGatewayTests.model])
                }) { server in
                    let api = server.connection()
                    let user = try await api.newGuest(granted: 1_000)
                    var charged: Int64 = 0
                    for (text, expires) in [("Tell me about the stars", false), ("What will the weather be like tomorrow?", true)] {
                        charged += try await Self.streamThroughAnOutage(text, holdExpires: expires, api: api, user: user, server: server, upstream: upstream, proxy: proxy)
                        let wallet = try await api.wallet(user)
                        #expect(wallet.balance == 1_000 - charged && wallet.held == 0, "\(wallet)")
                    }
                    try await api.expectBooksBalance(user)
                    await api.close()
                }
            }
        }
    }

    /// Streams `text` and cuts the database while the model is paused mid-answer; the answer ends during the outage.
    /// Then the database returns (after the hold's expiry and a housekeeping sweep when `holdExpires`), and the call
    /// must be charged its real usage exactly once. Returns what it cost.
    private static func streamThroughAnOutage(
        _ text: String, holdExpires: Bool, api: APIConnection, user: TestUser, server: LiveServer, upstream: DevLLMClient,
        proxy: OutageProxy
    ) async throws -> Int64 {
        let words = 6
        try await upstream.script([DevBehaviour(pauseAfterChunks: 2, answerTokens: words)])
        let (stream, head) = try await EventStreamClient.open(
            port: server.port, token: user.accessToken, path: "/v1/ai/chat/completions",
            json: Array(try JSONEncoder().encode(AIGatewayTests.chat(text, stream: true))))
        #expect(head.status == 200)
        var seen = 0
        while seen < 3 { if case .event = try await stream.nextEvent() { seen += 1 } }
        let hold = try #require(try await api.allEntries(user).first { $0.kind == "hold" }?.reason?.split(separator: " ").first.map(String.init))

        await proxy.cut()
        #expect(try await upstream.release() == 1)
        // The answer reaches the client whole; its charge cannot be written now.
        var done = false
        while case .event(_, _, let data) = try await stream.nextEvent() { if data == "[DONE]" { done = true } }
        await stream.close()
        #expect(done)

        if holdExpires {
            // Longer than the hold lives: it expires while the database is away.
            server.clock.advance(by: try #require(server.services.ai).holdTTL + 1)
        }
        try await proxy.restore()
        if holdExpires {
            // Housekeeping finds the expired hold first and releases it whole.
            var swept = false
            for _ in 0..<200 where !swept {
                swept = (try? await server.sweep()) != nil
                if !swept { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(swept, "the sweep ran once the database returned")
        }
        // Time passes on the server's clock (retries back off on it): the charge lands, within the hold's life when
        // it had not expired.
        let cost = AIGatewayTests.model.cost(
            promptTokens: DevAnswer.promptTokens([ChatMessage(role: "user", content: text)]), completionTokens: words)
        var charges: [LedgerEntry] = []
        for _ in 0..<60 {
            server.clock.advance(by: 2)
            try await Task.sleep(for: .milliseconds(100))
            guard let entries = try? await api.allEntries(user) else { continue }
            charges = entries.filter { ($0.kind == "capture" || $0.kind == "debit") && $0.reason?.hasPrefix(hold) == true }
            if !charges.isEmpty { break }
        }
        #expect(charges.count == 1 && charges.first?.amount == -cost, "\(holdExpires ? "after the hold expired" : "before it expired"): \(charges)")
        // Once: nothing is left to retry, so nothing more can land however long the retries would have run. The server's
        // clock stands still from here: a settlement still kept would wait on it for its next try (0.5 s at least) and
        // stay counted, so a count of zero is final (only a new call adds one), not a retry that is merely slow.
        let settlements = try #require(server.services.ai).settlements
        var left = settlements.count
        for _ in 0..<1_000 where left > 0 {
            try await Task.sleep(for: .milliseconds(10))
            left = settlements.count
        }
        #expect(left == 0, "the settlement is still kept for another try after its charge landed")
        let entries = try await api.allEntries(user).filter { $0.reason?.hasPrefix(hold) == true }
        #expect(entries.filter { $0.kind == "capture" || $0.kind == "debit" }.count == 1, "\(entries)")
        #expect(entries.map(\.kind).sorted() == (holdExpires ? ["debit", "expire", "hold"] : ["capture", "hold"]), "\(entries)")
        return cost
    }

    private func run(through proxy: OutageProxy) async throws {
        try await LiveServer.with(.postgres, configure: { configuration in
            try Self.through(proxy, &configuration)
            configuration.postgresLeaseTimeout = Self.leaseTimeout
        }) { server in
            let api = server.connection()
            let user = try await api.newGuest(granted: 100)
            let before = try await api.send(.post, "/v1/actions/ai.query", token: user.accessToken, headers: [.idempotencyKey: "before"])
            #expect(before.status == .ok, "\(before.text)")
            // The bound is the running pool's own: the longest any lease waits for a connection before it fails
            // `timedOut` (at the first tick of the pool's ticker past its deadline, so never sooner).
            let pool = try #require(server.services.store as? PostgresStore).pool
            let leaseTimeout = pool.configuration.acquireTimeout
            #expect(leaseTimeout == Self.leaseTimeout)

            await proxy.cut()
            let clock = ContinuousClock()
            let outageEnd = clock.now + Self.outage
            var answered = 0
            var slowest = (took: Duration.zero, request: "none")
            var round = 0
            // A fixed number of rounds, not a window of wall-clock time that a loaded machine fills with only a few; then
            // more until the outage has lasted its time.
            outage: while round < Self.outageRounds || clock.now < outageEnd {
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
                    // Measured by the client, so never less than the server's own time for the request.
                    let took = clock.now - start
                    if took > slowest.took { slowest = (took, "\(method) \(path) in round \(round)") }
                    #expect(response.status == .serviceUnavailable, "\(method) \(path) during the outage: \(response.status) \(response.text)")
                    #expect(response.errorCode == "unavailable")
                    #expect(response.headers[.retryAfter].flatMap(Int.init).map { $0 >= 1 } == true, "Retry-After on \(path)")
                    answered += 1
                    // One wait for a connection is the finding; more would only run into the test's time limit.
                    if took >= leaseTimeout { break outage }
                }
                let ready = try await api.send(.get, "/ready")
                #expect(ready.status == .serviceUnavailable, "/ready during the outage")
            }
            // The pool knows the database is down: the state in which a lease fails at once (`PoolFailure.unreachable`)
            // instead of waiting in line for a connection.
            #expect(!pool.isReachable, "the pool noticed the outage")
            // Not a timing test: a 503 that waited out the lease timeout (5 s) comes after it, one from a pool that fails
            // leases at once in microseconds of server time. A loaded machine adds scheduling delay to the client's
            // measure (1.5 s seen with the whole suite running on two cores), far less than the lease timeout. That a
            // lease fails at once rather than at the pool's next reconnect attempt (under 1 s) is for `PoolStateTests`
            // and `PostgresPoolTests` to prove: no bound on a loaded machine's wall clock tells those two apart.
            #expect(
                slowest.took < leaseTimeout,
                "no request waited out the lease timeout (\(leaseTimeout)) during the outage: the slowest, \(slowest.request), took \(slowest.took) (\(answered) answered)")

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
