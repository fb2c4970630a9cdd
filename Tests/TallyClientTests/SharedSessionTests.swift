import Foundation
import TallyAPI
@testable import TallyClient
import TallyServer
import TallyTestKit
import Testing

/// One session store shared by two clients (an app and its widget or extension), against the real server:
/// a refresh never presents a token the sibling already rotated, and a refusal never ends the sibling's session.
@Suite("Sessions shared between processes", .timeLimit(.minutes(10)))
struct SharedSessionTests {
    @Test("Two processes sharing one session store stay signed in through 100 concurrent refresh rounds",
        .timeLimit(.minutes(3)))
    func twoProcesses() async throws {
        try await TallyTestServer.with(configure: {
            // Shorter than the SDK's 30-s refresh margin: every request of the probes refreshes the session first.
            $0.accessTokenTTL = 20
            $0.limits.refreshPerSession = RateLimit(1_000_000, per: 3600)
        }) { server in
            let directory = Self.temporaryDirectory("tally-shared")
            defer { try? FileManager.default.removeItem(at: directory) }
            let storeDirectory = directory.appendingPathComponent("secure")
            // A linked user: losing the session would mean typing the password again. Signed in on the real
            // clock, as the probes run: the expiry stored with the access token is a time of that clock.
            let user = try await Self.linkedUser(server, store: try FileSecureStore(directory: storeDirectory)) {
                $0.clock = SystemClientClock()
            }

            let rounds = 100
            let probes = try (0..<2).map { index in
                try TallyProcess(
                    ["sdk-session-probe", "--store", storeDirectory.path, "--url", server.baseURL.absoluteString, "--rounds", "\(rounds)"],
                    name: "probe-\(index)", directory: directory)
            }
            defer { probes.forEach { $0.terminate() } }
            // Each probe restores the session, then waits for this line: the rounds of both start together.
            for probe in probes { try probe.send("go") }
            var spans: [ClosedRange<Double>] = []
            for probe in probes {
                let (status, output, errors) = await probe.finish()
                #expect(status == .exited(0), "\(output) \(errors)")
                // {"userId", "rounds", "refreshes", "refused", "error", "started", "finished"}
                let report = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
                #expect(report["userId"] as? String == user.userId)
                #expect(report["rounds"] as? Int == rounds)
                #expect(report["refreshes"] as? Int == rounds)
                #expect(report["refused"] as? Int == 0)  // the server saw no reused (or otherwise refused) refresh token
                #expect(report["error"] == nil)
                spans.append(try #require(report["started"] as? Double)...(try #require(report["finished"] as? Double)))
            }
            #expect(spans[0].overlaps(spans[1]), "the rounds of the two processes ran at the same time")
            // The session the two left behind is alive on the server.
            let (after, _) = server.client(secureStore: try FileSecureStore(directory: storeDirectory))
            #expect(try await after.restore()?.userId == user.userId)
            _ = try await after.fetch(after.walletQuery, forceRefresh: true)
        }
    }

    @Test("A client whose sibling already refreshed takes the sibling's access token instead of reusing its refresh token")
    func siblingAccessTokenIsTaken() async throws {
        try await TallyTestServer.with { server in
            try await Siblings.with(server) { s in
                // The server's clock passes the access token's expiry: each client's next request gets 401.
                server.serverClock.advance(by: 16 * 60)
                _ = try await s.app.fetch(s.app.walletQuery)
                _ = try await s.widget.fetch(s.widget.walletQuery)

                #expect(s.appTransport.count(path: "/v1/auth/refresh") == 1)
                #expect(s.widgetTransport.count(path: "/v1/auth/refresh") == 0)  // it took the token the app stored
                #expect(await s.widget.user == s.user)
                #expect(try s.store.read("session") != nil)
            }
        }
    }

    @Test("A client whose sibling already refreshed presents the stored refresh token, never the one it read at launch")
    func siblingRefreshTokenIsUsed() async throws {
        try await TallyTestServer.with { server in
            try await Siblings.with(server) { s in
                // By the device's clock the access token is about to expire: the app refreshes before its request.
                s.clock.advance(by: 15 * 60 - 20)
                _ = try await s.app.fetch(s.app.walletQuery)
                // Later the app's new token is about to expire too: the widget must refresh with the app's refresh token.
                s.clock.advance(by: 15 * 60 - 20)
                _ = try await s.widget.fetch(s.widget.walletQuery)

                let presented = (s.appTransport.requests + s.widgetTransport.requests).compactMap(Self.presentedRefreshToken)
                #expect(presented.count == 2)
                #expect(Set(presented).count == presented.count)  // no refresh token was presented twice
                #expect(await s.widget.user == s.user)
                _ = try await s.app.fetch(s.app.walletQuery, forceRefresh: true)  // the app is still signed in too
            }
        }
    }

    @Test("A refused refresh token that is no longer the stored one does not end the session a sibling stored")
    func refusalOfAReplacedToken() async throws {
        try await TallyTestServer.with { server in
            // A store without a lock file: nothing keeps the sibling from replacing the session mid-refresh.
            let store = MemorySecureStore()
            let email = "shared-\(UUID().uuidString.prefix(8).lowercased())@example.com"
            let user = try await Self.linkedUser(server, store: store, email: email)
            let (app, _) = server.client(secureStore: store)
            #expect(try await app.restore() == user)
            _ = try await app.fetch(app.walletQuery)  // the app holds a live access token, so its sign-out reaches the server
            let clock = ManualClock()
            let (widget, _) = server.client(clock: clock, secureStore: store) { configuration in
                // While the widget's refresh is on its way, the app signs out and in again: a new session is stored,
                // and the token the widget presents belongs to the revoked one.
                configuration.transport = BeforeFirstRefresh(wrapping: configuration.transport!) {
                    try await app.signOut()
                    _ = await app.session.deliverRevocations()  // sent in the background: wait for it to reach the server
                    try await app.signIn(email: email, password: Self.password)
                }
            }
            #expect(try await widget.restore() == user)
            clock.advance(by: 15 * 60 - 20)
            _ = try await widget.fetch(widget.walletQuery)

            #expect(await widget.user == user)
            #expect(store.read("session") != nil)
            _ = try await app.fetch(app.walletQuery, forceRefresh: true)
        }
    }

    // MARK: Helpers

    static let password = "correct horse battery"

    /// A guest linked to an email and password, signed in with its session in `store`.
    static func linkedUser(
        _ server: TallyTestServer, store: any SecureStore, email: String = "shared-\(UUID().uuidString.prefix(8).lowercased())@example.com",
        configure: (inout ClientConfiguration) -> Void = { _ in }
    ) async throws -> SessionUser {
        let (client, _) = server.client(secureStore: store, configure: configure)
        try await client.signInAsGuest()
        try await client.link(email: email, password: password)
        guard let user = await client.user, !user.isGuest else { throw TestFailure("not linked") }
        return user
    }

    static func presentedRefreshToken(_ request: TransportRequest) -> String? {
        guard request.path == "/v1/auth/refresh", let body = request.body else { return nil }
        return (try? JSONDecoder().decode(RefreshRequest.self, from: body))?.refreshToken
    }

    static func temporaryDirectory(_ prefix: String) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
    }
}

/// An app and its widget: two clients on one file store (so one lock file) and one device clock, both restored
/// as a linked user.
private struct Siblings {
    let app: Client
    let appTransport: FaultInjectingTransport
    let widget: Client
    let widgetTransport: FaultInjectingTransport
    let user: SessionUser
    let store: FileSecureStore
    let clock: ManualClock

    static func with(_ server: TallyTestServer, _ body: (Siblings) async throws -> Void) async throws {
        let directory = SharedSessionTests.temporaryDirectory("tally-siblings")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try FileSecureStore(directory: directory)
        let user = try await SharedSessionTests.linkedUser(server, store: store)
        let clock = ManualClock()
        let (app, appTransport) = server.client(clock: clock, secureStore: store)
        let (widget, widgetTransport) = server.client(clock: clock, secureStore: store)
        #expect(try await app.restore() == user)
        #expect(try await widget.restore() == user)
        try await body(
            Siblings(app: app, appTransport: appTransport, widget: widget, widgetTransport: widgetTransport, user: user, store: store, clock: clock))
    }
}

/// Runs `action` once, before forwarding the first `POST /v1/auth/refresh`.
private final class BeforeFirstRefresh: HTTPTransport {
    private actor Once {
        var done = false
        func claim() -> Bool {
            defer { done = true }
            return !done
        }
    }

    private let wrapped: any HTTPTransport
    private let action: @Sendable () async throws -> Void
    private let once = Once()

    init(wrapping wrapped: any HTTPTransport, action: @escaping @Sendable () async throws -> Void) {
        self.wrapped = wrapped
        self.action = action
    }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        if request.path == "/v1/auth/refresh", await once.claim() { try await action() }
        return try await wrapped.send(request)
    }
}
