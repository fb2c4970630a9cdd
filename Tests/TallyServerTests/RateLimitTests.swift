import Foundation
import HTTPTypes
import TallyAPI
import TallyServer
import TallyStore
import Testing

/// Every door's rate limit over the real HTTP stack: its 429 with `Retry-After`, and recovery once the
/// (manual) clock passes the window. Tests that need several client addresses trust the loopback proxy
/// and send `X-Forwarded-For`.
@Suite("Rate limits", .timeLimit(.minutes(10)))
struct RateLimitTests {
    /// Limits with the loopback trusted as a proxy, so requests can come "from" any address.
    static func behindProxy(_ change: (inout LimitsConfiguration) -> Void = { _ in }) -> LimitsConfiguration {
        var limits = LimitsConfiguration()
        limits.trustedProxies = ["127.0.0.0/8", "::1/128"].compactMap { IPNetwork(cidr: $0) }
        change(&limits)
        return limits
    }

    static func from(_ address: String) -> HTTPFields { [.forwardedFor: address] }

    static func newEmail() -> String { "u\(UUID().uuidString.prefix(8).lowercased())@example.com" }

    /// Expects `429 rate_limited` with `Retry-After: seconds` (or any positive value when `nil`).
    static func expectLimited(_ response: APIResponse, retryAfter seconds: Int? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(response.status == .tooManyRequests && response.errorCode == "rate_limited", "\(response.status) \(response.text)",
            sourceLocation: sourceLocation)
        let header = Int(response.headers[.retryAfter] ?? "") ?? 0
        #expect(seconds.map { header == $0 } ?? (header >= 1), "Retry-After: \(header)", sourceLocation: sourceLocation)
    }

    /// A guest linked to `email` / `password`, signed up from `address`.
    static func linkedUser(_ api: APIConnection, email: String, password: String, from address: String = "192.0.2.200") async throws {
        let guest = try await api.newGuest()
        let linked = try await api.link(guest.accessToken, email, password, from: address)
        #expect(linked.status == .ok, "link: \(linked.status) \(linked.text)")
    }

    @Test("Sign-in per address: 429 beyond the limit, other addresses unaffected, recovery after the window",
        arguments: StoreKind.allCases)
    func signInPerAddress(kind: StoreKind) async throws {
        let limits = Self.behindProxy { $0.signInPerAddress = RateLimit(3, per: 60) }
        try await LiveServer.with(kind, limits: limits) { server in
            let api = server.connection()
            for _ in 0..<3 {
                let wrong = try await api.signIn(Self.newEmail(), "wrong password", from: "203.0.113.1")
                #expect(wrong.status == .unauthorized)
            }
            let limited = try await api.signIn(Self.newEmail(), "wrong password", from: "203.0.113.1")
            Self.expectLimited(limited, retryAfter: 20)
            let elsewhere = try await api.signIn(Self.newEmail(), "wrong password", from: "203.0.113.2")
            #expect(elsewhere.status == .unauthorized)
            server.clock.advance(by: 60)
            let recovered = try await api.signIn(Self.newEmail(), "wrong password", from: "203.0.113.1")
            #expect(recovered.status == .unauthorized)
            await api.close()
        }
    }

    @Test("Lockout: five failures lock the attacker's address only; the real user signs in from theirs; no lock is permanent",
        arguments: StoreKind.allCases)
    func lockout(kind: StoreKind) async throws {
        let limits = Self.behindProxy { limits in
            limits.signInPerAddress = RateLimit(1_000, per: 60)
            limits.signInLockout.accountFailures = 8
        }
        try await LiveServer.with(kind, limits: limits) { server in
            let api = server.connection()
            let (email, password) = (Self.newEmail(), "correct horse")
            try await Self.linkedUser(api, email: email, password: password)
            let attacker = "203.0.113.66"
            for _ in 0..<5 {
                let wrong = try await api.signIn(email, "guess guess", from: attacker)
                #expect(wrong.status == .unauthorized)
            }
            // Locked: even the right password from the attacker's address gets 429, so a lock reveals nothing.
            for candidate in ["guess again", password] {
                let locked = try await api.signIn(email, candidate, from: attacker)
                Self.expectLimited(locked, retryAfter: 900)
            }
            // The attacker moves on to other addresses, past the account's ceiling: every failing address slows down.
            for index in 0..<4 {
                let wrong = try await api.signIn(email, "guess guess", from: "198.51.100.\(index)")
                #expect(wrong.status == .unauthorized)
            }
            let slowed = try await api.signIn(email, "guess guess", from: "198.51.100.3")
            Self.expectLimited(slowed)
            // The real user, from their own address, signs in at once while all of that goes on.
            let real = try await api.signIn(email, password, from: "192.0.2.10")
            #expect(real.status == .ok, "\(real.status) \(real.text)")
            // Unknown emails are locked the same way: a lockout is no oracle of which emails exist.
            let unknown = Self.newEmail()
            for _ in 0..<5 {
                _ = try await api.signIn(unknown, "guess guess", from: attacker)
            }
            Self.expectLimited(
                try await api.signIn(unknown, "guess guess", from: attacker),
                retryAfter: 900)
            // Fifteen minutes later the attacker's address may try again: nothing is permanent.
            server.clock.advance(by: 900)
            let again = try await api.signIn(email, "guess guess", from: attacker)
            #expect(again.status == .unauthorized)
            let owner = try await api.signIn(email, password, from: attacker)
            #expect(owner.status == .ok)
            await api.close()
        }
    }

    @Test("Link attempts per user and per address: 429, then recovery after the window", arguments: StoreKind.allCases)
    func link(kind: StoreKind) async throws {
        let limits = Self.behindProxy { limits in
            limits.linkPerUser = RateLimit(2, per: 3600)
            limits.linkPerAddress = RateLimit(3, per: 3600)
        }
        try await LiveServer.with(kind, limits: limits) { server in
            let api = server.connection()
            let taken = Self.newEmail()
            try await Self.linkedUser(api, email: taken, password: "correct horse", from: "192.0.2.1")
            // One guest probing emails: two answers, then 429 — credential_in_use is no free oracle.
            let prober = try await api.newGuest()
            for _ in 0..<2 {
                let probe = try await api.link(prober.accessToken, taken, "some password", from: "203.0.113.5")
                #expect(probe.status == .conflict && probe.errorCode == "credential_in_use")
            }
            Self.expectLimited(
                try await api.link(prober.accessToken, taken, "some password", from: "203.0.113.6"),
                retryAfter: 1800)
            // Fresh guests from one address: three attempts in all from it (two above were from another).
            for _ in 0..<3 {
                let guest = try await api.newGuest()
                let probe = try await api.link(guest.accessToken, taken, "some password", from: "203.0.113.7")
                #expect(probe.status == .conflict)
            }
            let another = try await api.newGuest()
            Self.expectLimited(
                try await api.link(another.accessToken, taken, "some password", from: "203.0.113.7"))
            server.clock.advance(by: 3600)
            let later = try await api.link(prober.accessToken, Self.newEmail(), "some password", from: "203.0.113.7")
            #expect(later.status == .ok, "\(later.status) \(later.text)")
            await api.close()
        }
    }

    @Test("Refresh per session: 429 leaves the token valid for the retry; refused refreshes per address block the address",
        arguments: StoreKind.allCases)
    func refresh(kind: StoreKind) async throws {
        let limits = Self.behindProxy { limits in
            limits.refreshPerSession = RateLimit(2, per: 60)
            limits.refreshFailuresPerAddress = RateLimit(3, per: 60)
        }
        try await LiveServer.with(kind, limits: limits) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            var token = user.refreshToken
            for _ in 0..<2 {
                let rotated = try await api.refresh(token)
                #expect(rotated.status == .ok)
                token = try rotated.decode(SessionTokens.self).refreshToken
            }
            Self.expectLimited(try await api.refresh(token), retryAfter: 30)
            // Another session is not affected.
            let other = try await api.newGuest()
            #expect(try await api.refresh(other.refreshToken).status == .ok)
            server.clock.advance(by: 30)
            // The refused token was not used up: no reuse detection, the session lives on.
            let retried = try await api.refresh(token)
            #expect(retried.status == .ok, "\(retried.status) \(retried.text)")
            token = try retried.decode(SessionTokens.self).refreshToken

            // Three refused refreshes from one address: then even a good token from it gets 429.
            for bogus in ["nope", String(repeating: "x", count: 600), "unknown-token"] {
                let refused = try await api.refresh(bogus, from: "203.0.113.9")
                #expect(refused.status == .unauthorized)
            }
            Self.expectLimited(
                try await api.refresh(token, from: "203.0.113.9"),
                retryAfter: 20)
            server.clock.advance(by: 60)
            #expect(
                try await api.refresh(token, from: "203.0.113.9").status
                    == .ok)
            await api.close()
        }
    }

    @Test("Guest sign-ins per device secret: 429, then recovery", arguments: StoreKind.allCases)
    func guestPerDevice(kind: StoreKind) async throws {
        var limits = LimitsConfiguration()
        limits.guestSignInsPerDevice = RateLimit(3, per: 3600)
        try await LiveServer.with(kind, limits: limits) { server in
            let api = server.connection()
            let device = "device-" + UUID().uuidString
            for _ in 0..<3 { _ = try await api.newGuest(deviceId: device) }
            Self.expectLimited(try await api.send(.post, "/v1/auth/guest", json: GuestSignInRequest(deviceId: device)), retryAfter: 1200)
            _ = try await api.newGuest()
            server.clock.advance(by: 3600)
            _ = try await api.newGuest(deviceId: device)
            await api.close()
        }
    }

    @Test("Wrong admin keys per address: then 429 even with the right key, from that address only, until the window passes",
        arguments: StoreKind.allCases)
    func adminFailures(kind: StoreKind) async throws {
        let limits = Self.behindProxy { $0.adminFailuresPerAddress = RateLimit(3, per: 60) }
        try await LiveServer.with(kind, limits: limits) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let path = "/admin/v1/users/\(user.userId)"
            for index in 0..<3 {
                let wrong = try await api.send(.get, path, token: "wrong-key-\(index)", headers: Self.from("203.0.113.20"))
                #expect(wrong.status == .unauthorized)
            }
            Self.expectLimited(try await api.send(.get, path, admin: true, headers: Self.from("203.0.113.20")), retryAfter: 20)
            #expect(try await api.send(.get, path, admin: true, headers: Self.from("203.0.113.21")).status == .ok)
            server.clock.advance(by: 60)
            #expect(try await api.send(.get, path, admin: true, headers: Self.from("203.0.113.20")).status == .ok)
            await api.close()
        }
    }

    @Test("X-Forwarded-For counts only from a trusted proxy; IPv6 clients share their /64", arguments: StoreKind.allCases)
    func trustedProxies(kind: StoreKind) async throws {
        // Not trusted: the header is ignored, every request counts for the loopback peer.
        var untrusted = LimitsConfiguration()
        untrusted.signInPerAddress = RateLimit(2, per: 60)
        try await LiveServer.with(kind, limits: untrusted) { server in
            let api = server.connection()
            for address in ["203.0.113.1", "203.0.113.2"] {
                let wrong = try await api.signIn(Self.newEmail(), "wrong password", from: address)
                #expect(wrong.status == .unauthorized)
            }
            Self.expectLimited(try await api.signIn(Self.newEmail(), "wrong password", from: "203.0.113.3"))
            await api.close()
        }
        // Trusted: each forwarded address counts on its own; an IPv6 /64 is one address; garbage is the peer.
        let trusted = Self.behindProxy { $0.signInPerAddress = RateLimit(2, per: 60) }
        try await LiveServer.with(kind, limits: trusted) { server in
            let api = server.connection()
            func attempt(_ address: String) async throws -> APIResponse {
                try await api.signIn(Self.newEmail(), "wrong password", from: address)
            }
            for address in ["203.0.113.1", "203.0.113.2", "203.0.113.3", "2001:db8:1:2::1", "2001:db8:1:2::2"] {
                #expect(try await attempt(address).status == .unauthorized, "\(address)")
            }
            Self.expectLimited(try await attempt("2001:db8:1:2:ffff::9"), retryAfter: 30)
            #expect(try await attempt("2001:db8:1:3::1").status == .unauthorized)
            #expect(try await attempt("spoofed, 203.0.113.1").status == .unauthorized)
            Self.expectLimited(try await attempt("203.0.113.1"))
            #expect(try await attempt("not-an-address").status == .unauthorized, "malformed: the peer, not yet limited")
            #expect(try await attempt("203.0.113.1:443").status == .unauthorized)
            Self.expectLimited(try await attempt("also bad"), retryAfter: 30)
            await api.close()
        }
    }

    @Test("Sessions per user: one more revokes the oldest", arguments: StoreKind.allCases)
    func sessionsPerUser(kind: StoreKind) async throws {
        var limits = LimitsConfiguration()
        limits.sessionsPerUser = 2
        try await LiveServer.with(kind, limits: limits) { server in
            let api = server.connection()
            let device = "device-" + UUID().uuidString
            let oldest = try await api.newGuest(deviceId: device)
            #expect(try await api.send(.get, "/v1/me", token: oldest.accessToken).status == .ok)
            var newer: [TestUser] = []
            for _ in 0..<2 {
                server.clock.advance(by: 1)
                newer.append(try await api.newGuest(deviceId: device))
            }
            // A verified token is trusted for up to 2 s of the server's clock (SessionCache); then its session is gone.
            server.clock.advance(by: 3)
            #expect(try await api.send(.get, "/v1/me", token: oldest.accessToken).status == .unauthorized)
            #expect(try await api.refresh(oldest.refreshToken).status == .unauthorized)
            for session in newer { #expect(try await api.send(.get, "/v1/me", token: session.accessToken).status == .ok) }
            await api.close()
        }
    }

    @Test("A flood of 429s and lockouts is logged once per key and window, naming no email, address or secret",
        arguments: StoreKind.allCases)
    func securityLogs(kind: StoreKind) async throws {
        let logs = LogCapture()
        let limits = Self.behindProxy { limits in
            limits.signInPerAddress = RateLimit(100, per: 60)
            limits.adminFailuresPerAddress = RateLimit(2, per: 60)
        }
        try await LiveServer.with(kind, limits: limits, logs: logs) { server in
            let api = server.connection()
            let (email, attacker) = (Self.newEmail(), "203.0.113.77")
            for _ in 0..<20 {
                _ = try await api.signIn(email, "guess guess", from: attacker)
            }
            for index in 0..<20 {
                _ = try await api.send(.get, "/admin/v1/users/\(UUID().uuidString)", token: "wrong-admin-key-\(index)", headers: Self.from(attacker))
            }
            let user = try await api.newGuest(granted: 42)

            #expect(logs.lines("sign-in locked for an address").count == 1)
            #expect(logs.lines("sign-in refused by the lockout").count == 1, "15 refusals, one line")
            #expect(logs.lines("admin key rejected").count == 1, "2 wrong keys, one line")
            let limited = logs.lines("rate limited")
            #expect(limited.count == 1 && limited.first?.metadata["tally.limit"] == "admin key failures per address", "\(limited.map(\.text))")
            let grants = logs.lines("admin grant")
            #expect(grants.count == 1 && grants.first?.metadata["tally.user"] == user.userId && grants.first?.metadata["tally.amount"] == "42")
            for line in logs.lines {
                for secret in [email, attacker, "guess guess", "wrong-admin-key", server.adminKey, user.accessToken, user.refreshToken] {
                    #expect(!line.text.contains(secret), "a log line contains a secret: \(line.text)")
                }
            }
            await api.close()
        }
    }
}

extension HTTPField.Name {
    static let forwardedFor = HTTPField.Name("X-Forwarded-For")!
}

extension APIConnection {
    /// `POST /v1/auth/sign-in`, as if from `address` (through the trusted loopback proxy).
    func signIn(_ email: String, _ password: String, from address: String) async throws -> APIResponse {
        try await send(.post, "/v1/auth/sign-in", json: CredentialsRequest(email: email, password: password), headers: [.forwardedFor: address])
    }

    /// `POST /v1/auth/link` with the access token `token`, as if from `address`.
    func link(_ token: String, _ email: String, _ password: String, from address: String) async throws -> APIResponse {
        try await send(
            .post, "/v1/auth/link", token: token, json: CredentialsRequest(email: email, password: password), headers: [.forwardedFor: address])
    }

    /// `POST /v1/auth/refresh`, from the loopback or as if from `address`.
    func refresh(_ token: String, from address: String? = nil) async throws -> APIResponse {
        try await send(.post, "/v1/auth/refresh", json: RefreshRequest(refreshToken: token), headers: address.map { [.forwardedFor: $0] } ?? [:])
    }
}
