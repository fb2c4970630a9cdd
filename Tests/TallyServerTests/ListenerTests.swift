import Foundation
import HTTPTypes
import TallyAPI
import TallyServer
import Testing

/// The two listeners and the connection guards, over real sockets: what each listener serves, the
/// per-address cap's refusal, and the idle, header and body timeouts (short here; every wait bounded).
@Suite("Listeners and connection guards", .timeLimit(.minutes(2)))
struct ListenerTests {
    @Test("/metrics and the admin API are served on the admin listener only; the probes on both", arguments: StoreKind.allCases)
    func operatorRoutesOnlyOnTheAdminListener(kind: StoreKind) async throws {
        try await LiveServer.with(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            for path in ["/metrics", "/admin/v1/users/\(user.userId)"] {
                let onPublic = try await api.send(.get, path, token: nil, headers: [.authorization: "Bearer \(server.adminKey)"], on: .api)
                #expect(onPublic.status == .notFound && onPublic.errorCode == "not_found", "\(path) on the public listener: \(onPublic.status)")
            }
            let grantOnPublic = try await api.send(
                .post, "/admin/v1/users/\(user.userId)/grants", json: GrantRequest(amount: 5, reason: "x"),
                headers: [.authorization: "Bearer \(server.adminKey)"], on: .api)
            #expect(grantOnPublic.status == .notFound)
            #expect(try await api.wallet(user).balance == 0, "a grant sent to the public listener changed nothing")

            let metrics = try await api.send(.get, "/metrics", on: .admin)
            #expect(metrics.status == .ok && metrics.text.contains("tally_http_requests_total"))
            #expect(try await api.send(.get, "/admin/v1/users/\(user.userId)", admin: true).status == .ok)
            try await api.grant(5, to: user)
            #expect(try await api.wallet(user).balance == 5)
            #expect(try await api.send(.get, "/v1/wallet", token: user.accessToken, on: .admin).status == .notFound)
            for listener in [APIConnection.Listener.api, .admin] {
                #expect(try await api.send(.get, "/health", on: listener).status == .ok)
                #expect(try await api.send(.get, "/ready", on: listener).status == .ok)
            }
            await api.close()
        }
    }

    @Test("A connection beyond the per-address cap gets a 503 with Retry-After and a JSON error, then a slot frees")
    func perAddressCap() async throws {
        try await LiveServer.with(.sqlite, configure: { $0.connections.maxConnectionsPerIP = 2 }) { server in
            let held = [try await RawConnection.open(port: server.port), try await RawConnection.open(port: server.port)]
            try await held[0].send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(try await held[0].response(within: .seconds(5))?.hasPrefix("HTTP/1.1 200") == true, "admitted and served")

            let refused = try await RawConnection.open(port: server.port)
            try await refused.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(await refused.closedByServer(within: .seconds(5)), "the refused connection is closed")
            let answer = refused.received
            #expect(answer.hasPrefix("HTTP/1.1 503 Service Unavailable\r\n"), "\(answer)")
            #expect(answer.contains("Retry-After: 1\r\n") && answer.contains("Connection: close\r\n"))
            let body = try #require(answer.range(of: "\r\n\r\n").map { answer[$0.upperBound...] })
            let error = try TallyJSON.decoder().decode(ErrorResponse.self, from: Data(body.utf8))
            #expect(error.error.code == .unavailable)

            // The admin listener has a cap of its own: operators still get in.
            #expect(try await server.connection().send(.get, "/metrics", on: .admin).status == .ok)

            await held[1].close()
            var served = false
            for _ in 0..<50 where !served {  // the close reaches the server asynchronously
                let next = try await RawConnection.open(port: server.port)
                try await next.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
                served = try await next.response(within: .seconds(5))?.hasPrefix("HTTP/1.1 200") == true
                await next.close()
                if !served { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(served, "a closed connection gives its slot back")
            await held[0].close()
        }
    }

    @Test("An idle keep-alive connection is closed after the idle timeout")
    func idleTimeout() async throws {
        try await LiveServer.with(.sqlite, configure: { $0.connections.idleTimeout = .milliseconds(500) }) { server in
            // Under load the request may reach the server after the idle timeout already closed the fresh
            // connection (that is the timeout working too): try again until one is answered, then watch it idle.
            var answered: RawConnection?
            for _ in 0..<10 where answered == nil {
                let connection = try await RawConnection.open(port: server.port)
                try await connection.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
                if try await connection.response(within: .seconds(5)) != nil { answered = connection } else { await connection.close() }
            }
            let connection = try #require(answered, "no request was answered on a fresh connection in 10 tries")
            #expect(await connection.closedByServer(within: .seconds(5)))
        }
    }

    @Test("A request head trickling in (slowloris) is cut off at the header timeout; idle time between requests is not counted")
    func headerTimeout() async throws {
        try await LiveServer.with(
            .sqlite, configure: { $0.connections.headerTimeout = .milliseconds(400) }
        ) { server in
            let start = ContinuousClock.now  // before the connect: the server counts from its accept
            let slow = try await RawConnection.open(port: server.port)
            try await slow.send("GET /health HTTP/1.1\r\n")
            var trickled = 0
            while trickled < 40, !(await slow.closedByServer(within: .milliseconds(100))) {
                try? await slow.send("X-Slow-\(trickled): 1\r\n")  // a header every 100 ms: never idle, never complete
                trickled += 1
            }
            #expect(trickled < 40, "the slow head was not cut off within 4 s")
            #expect(ContinuousClock.now - start >= .milliseconds(400), "cut off before the header timeout")
            #expect(!slow.received.contains("HTTP/1.1 200"))
            await slow.close()

            // A kept-alive connection may wait longer than the header timeout before its next request. Its first
            // request must reach the server within 400 ms of the connect: a test process starved of the CPU for
            // longer (two cores, every suite at once) gets a fresh connection, as a client would.
            var answered: RawConnection?
            for _ in 0..<10 where answered == nil {
                let connection = try await RawConnection.open(port: server.port)
                try? await connection.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
                if (try? await connection.response(within: .seconds(5))) ?? nil != nil { answered = connection } else { await connection.close() }
            }
            let patient = try #require(answered, "no request was answered on a fresh connection in 10 tries")
            #expect(!(await patient.closedByServer(within: .seconds(1))), "closed while idle, before the idle timeout")
            try await patient.send("GET /ready HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(try await patient.response(within: .seconds(5))?.hasPrefix("HTTP/1.1 200") == true)
            await patient.close()
        }
    }

    @Test("A request body that stops arriving is cut off at the request timeout")
    func requestTimeout() async throws {
        try await LiveServer.with(.sqlite, configure: { $0.connections.requestTimeout = .milliseconds(400) }) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            await api.close()
            let slow = try await RawConnection.open(port: server.port)
            try await slow.send(
                "POST /v1/wallet/holds HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer \(user.accessToken)\r\n"
                    + "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"amount\":")
            #expect(await slow.closedByServer(within: .seconds(5)))
            #expect(!slow.received.contains("HTTP/1.1 201"))
        }
    }
}
