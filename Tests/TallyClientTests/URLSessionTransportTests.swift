import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import TallyClient
import Testing

/// Requests the loopback server holds until the test ends, so a slow response never outlives the test.
private final class Parking: Sendable {
    private struct State {
        var released = false
        var arrivals = 0
        var parked: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// How many requests have arrived to be parked.
    var arrivals: Int { state.withLock { $0.arrivals } }

    func park() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let released = state.withLock { state in
                state.arrivals += 1
                if !state.released { state.parked.append(continuation) }
                return state.released
            }
            if released { continuation.resume() }
        }
    }

    func releaseAll() {
        let parked = state.withLock { state in
            state.released = true
            defer { state.parked = [] }
            return state.parked
        }
        for continuation in parked { continuation.resume() }
    }
}

/// A tiny HTTP server on a loopback port: `/echo`, `/status/{code}`, `/slow`.
private struct LoopbackServer: Sendable {
    let port: Int
    let parking: Parking
    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    static func with<T: Sendable>(_ body: @Sendable (LoopbackServer) async throws -> T) async throws -> T {
        let parking = Parking()
        let router = Router()
        for method in [HTTPRequest.Method.get, .post, .patch, .delete] {
            router.on("/echo", method: method) { request, _ -> Response in
                let body = try await request.body.collect(upTo: 1 << 20)
                var headers: HTTPFields = [HTTPField.Name("X-Echo-Method")!: request.method.rawValue]
                for field in request.headers where field.name.canonicalName.hasPrefix("x-") {
                    headers[HTTPField.Name("X-Echo-" + field.name.canonicalName.dropFirst(2))!] = field.value
                }
                headers[HTTPField.Name("X-Echo-Path")!] = request.uri.description
                return Response(status: .created, headers: headers, body: ResponseBody(byteBuffer: body))
            }
        }
        router.get("/status/{code}") { _, context -> Response in
            let code = context.parameters.get("code", as: Int.self) ?? 500
            let json = #"{"error":{"code":"rate_limited","message":"slow down"}}"#
            return Response(
                status: .init(code: code), headers: [.retryAfter: "120", .contentType: "application/json"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: json)))
        }
        router.get("/slow") { _, _ -> Response in
            await parking.park()
            return Response(status: .ok)
        }
        var logger = Logger(label: "tally.client.test")
        logger.logLevel = .critical
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in portContinuation.yield(channel.localAddress?.port ?? 0) }, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            let serviceGroup = ServiceGroup(configuration: .init(services: [app], logger: logger))
            group.addTask { try await serviceGroup.run() }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CancellationError() }
            let result = await Result { try await body(LoopbackServer(port: port, parking: parking)) }
            parking.releaseAll()
            await serviceGroup.triggerGracefulShutdown()
            try await group.waitForAll()
            return try result.get()
        }
    }
}

extension Result where Failure == any Error {
    fileprivate init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}

extension HTTPField.Name {
    fileprivate static let retryAfter = HTTPField.Name("Retry-After")!
}

@Suite(.timeLimit(.minutes(1))) struct URLSessionTransportTests {
    @Test func roundTripsStatusHeadersAndBody() async throws {
        try await LoopbackServer.with { server in
            let transport = URLSessionTransport(baseURL: server.baseURL)
            let body = Data(#"{"amount":3}"#.utf8)
            let request = TransportRequest(
                method: "POST", path: "/echo?source=test", headers: ["X-Test": "hello", "Content-Type": "application/json"], body: body,
                timeout: 10)
            let response = try await transport.send(request)
            #expect(response.status == 201)
            #expect(response.body == body)
            #expect(response.headers["x-echo-method"] == "POST")
            #expect(response.headers["x-echo-test"] == "hello")
            #expect(response.headers["x-echo-path"] == "/echo?source=test")
            #expect(response.header("X-Echo-Test") == "hello")
            #expect(response.headers.keys.allSatisfy { $0 == $0.lowercased() })

            let get = try await transport.send(TransportRequest(method: "GET", path: "/echo", timeout: 10))
            #expect(get.status == 201 && get.body.isEmpty && get.headers["x-echo-method"] == "GET")
        }
    }

    @Test func errorStatusesComeBackWithRetryAfter() async throws {
        try await LoopbackServer.with { server in
            let transport = URLSessionTransport(baseURL: server.baseURL)
            for status in [304, 409, 429, 503] {
                let response = try await transport.send(TransportRequest(method: "GET", path: "/status/\(status)", timeout: 10))
                #expect(response.status == status)
                #expect(response.header("Retry-After") == "120")
                if status != 304 { #expect(String(decoding: response.body, as: UTF8.self).contains("rate_limited")) }
            }
        }
    }

    @Test func aSilentServerTimesOut() async throws {
        try await LoopbackServer.with { server in
            let transport = URLSessionTransport(baseURL: server.baseURL)
            let started = ContinuousClock.now
            // URLSession's own timer (real time): long enough that a loaded machine still delivers the request
            // before it fires (500 ms was not, with every suite running at once on two cores).
            await #expect(throws: TransportError.timedOut) {
                try await transport.send(TransportRequest(method: "GET", path: "/slow", timeout: 2))
            }
            let elapsed = ContinuousClock.now - started
            #expect(server.parking.arrivals == 1, "the request reached the server before timing out")
            #expect(elapsed >= .milliseconds(1_900) && elapsed < .seconds(10), "took \(elapsed)")
        }
    }

    @Test func cancellingTheTaskCancelsTheRequest() async throws {
        try await LoopbackServer.with { server in
            let transport = URLSessionTransport(baseURL: server.baseURL)
            let task = Task { try await transport.send(TransportRequest(method: "GET", path: "/slow", timeout: 50)) }
            try await waitUntil { server.parking.arrivals >= 1 }  // the server holds the request
            let started = ContinuousClock.now
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(ContinuousClock.now - started < .seconds(2))
        }
    }

    /// Issue 43: cancelling a request while URLSession delivered its answer deadlocked swift-corelibs-foundation
    /// (swift-corelibs-foundation#5412: the cancel waited for the task's queue inside the cancellation handler, the
    /// queue for the handler's lock), and every later request of the session waited behind it.
    @Test("Requests cancelled at every moment of their answer all return at once, and the session answers afterwards")
    func cancellationsRacingAnswersNeverHang() async throws {
        try await LoopbackServer.with { server in
            let transport = URLSessionTransport(baseURL: server.baseURL)
            let burners = CPUBurners(count: 2)
            defer { burners.stop() }
            let watchdog = CallWatchdog(grace: 20)
            defer { watchdog.stop() }
            // How long an answer takes here and now: cancellations are spread over twice that, so that many meet the
            // answer's delivery.
            var took: [UInt64] = []
            for _ in 0..<21 {
                let start = DispatchTime.now().uptimeNanoseconds
                _ = try await transport.send(TransportRequest(method: "GET", path: "/echo", timeout: 10))
                took.append(DispatchTime.now().uptimeNanoseconds - start)
            }
            let spread = max(took.sorted()[10] * 2, 1_000)
            for round in 0..<200 {
                try await watchdog.call("round \(round) of cancelled requests", limit: 10) {
                    await withTaskGroup(of: Void.self) { group in
                        for _ in 0..<20 {
                            group.addTask {
                                let request = Task { try await transport.send(TransportRequest(method: "GET", path: "/echo", timeout: 10)) }
                                try? await Task.sleep(nanoseconds: UInt64.random(in: 0..<spread))
                                request.cancel()
                                _ = try? await request.value
                            }
                        }
                    }
                }
            }
            let response = try await watchdog.call("a request after the cancellations", limit: 10) {
                try await transport.send(TransportRequest(method: "GET", path: "/echo", timeout: 10))
            }
            #expect(response.status == 201)
        }
    }

    @Test func nothingListeningIsOffline() async throws {
        let port = try await LoopbackServer.with { $0.port }  // a port that was just closed
        let transport = URLSessionTransport(baseURL: URL(string: "http://127.0.0.1:\(port)")!)
        await #expect(throws: TransportError.offline) {
            try await transport.send(TransportRequest(method: "GET", path: "/echo", timeout: 10))
        }
    }
}
