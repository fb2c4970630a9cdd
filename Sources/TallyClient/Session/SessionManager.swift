import Foundation
import TallyAPI

/// The signed-in user as the app sees it: no tokens.
public struct SessionUser: Sendable, Hashable, Codable {
    /// The server's user id.
    public var userId: String
    /// True until the account is linked to an email and password.
    public var isGuest: Bool
}

/// Owns the tokens: signs in, keeps the refresh token in the secure store, hands out access tokens,
/// and refreshes them single-flight (fifty requests refused with 401 at once cause one refresh).
actor SessionManager: AccessTokenProvider {
    /// What survives a restart, in the secure store: who, and the refresh token.
    private struct Persisted: Codable {
        var userId: String
        var isGuest: Bool
        var refreshToken: String
    }

    private static let sessionItem = "session"
    private static let installationItem = "installation-secret"
    /// Refresh this long before the access token expires, so a request does not carry a dying token.
    private static let refreshMargin: TimeInterval = 30

    private let secureStore: any SecureStore
    private let clock: any ClientClock
    private let executor: RequestExecutor
    /// Told whenever the signed-in user changes (sign-in as someone else, sign-out, session lost).
    private let userChanged: @Sendable (_ previous: String?, _ current: String?) async -> Void

    private var persisted: Persisted?
    private var accessToken: String?
    private var expiresAt = Date.distantPast
    private var refreshing: Task<Void, any Error>?

    init(
        secureStore: any SecureStore, clock: any ClientClock, executor: RequestExecutor,
        userChanged: @escaping @Sendable (String?, String?) async -> Void
    ) {
        self.secureStore = secureStore
        self.clock = clock
        self.executor = executor
        self.userChanged = userChanged
    }

    /// The signed-in user, if any.
    var user: SessionUser? { persisted.map { SessionUser(userId: $0.userId, isGuest: $0.isGuest) } }

    /// Loads the session kept by an earlier launch; the first request refreshes its access token.
    func restore() throws -> SessionUser? {
        if persisted == nil, let data = try secureStore.read(Self.sessionItem) {
            persisted = try? JSONDecoder().decode(Persisted.self, from: data)
        }
        return user
    }

    /// Signs in as this installation's guest. The installation secret outlives sign-out, so the device's guest
    /// (and its free quota) stays the same.
    func signInAsGuest() async throws -> SessionUser {
        let body = try TallyJSON.encoder().encode(GuestSignInRequest(deviceId: try installationSecret()))
        let response = try await executor.send(.post("/v1/auth/guest", authenticated: false), body: body, auth: nil)
        return try await adopt(try decode(SessionTokens.self, response))
    }

    /// Signs in to a linked account with email and password.
    func signIn(email: String, password: String) async throws -> SessionUser {
        let body = try TallyJSON.encoder().encode(CredentialsRequest(email: email, password: password))
        let response = try await executor.send(.post("/v1/auth/sign-in", authenticated: false), body: body, auth: nil)
        return try await adopt(try decode(SessionTokens.self, response))
    }

    /// Attaches an email and password to the current (guest) account, in place: same user, same wallet.
    func link(email: String, password: String) async throws -> Me {
        let body = try TallyJSON.encoder().encode(CredentialsRequest(email: email, password: password))
        let response = try await executor.send(.post("/v1/auth/link"), body: body, auth: self)
        let me = try decode(Me.self, response)
        if var current = persisted, current.userId == me.userId {
            current.isGuest = me.isGuest
            try save(current)
        }
        return me
    }

    /// Ends the session on the server (best effort) and forgets it here; the previous user's data is cleared.
    /// The installation secret stays: it is the device's, not the user's.
    func signOut() async {
        if accessToken != nil {
            _ = try? await executor.send(.post("/v1/auth/sign-out"), auth: self)
        }
        await forget()
    }

    // MARK: AccessTokenProvider

    func accessToken() async throws -> String {
        guard persisted != nil else { throw ClientError.unauthorized }
        if let accessToken, expiresAt.timeIntervalSince(clock.now) > Self.refreshMargin { return accessToken }
        try await refreshOnce(replacing: accessToken)
        guard let accessToken else { throw ClientError.unauthorized }
        return accessToken
    }

    func refresh(after token: String) async throws { try await refreshOnce(replacing: token) }

    /// Refreshes unless someone already replaced `token`; concurrent callers share one refresh.
    private func refreshOnce(replacing token: String?) async throws {
        if let token, token != accessToken { return }
        if let refreshing { return try await refreshing.value }
        let task = Task { try await self.performRefresh() }
        refreshing = task
        defer { refreshing = nil }
        try await task.value
    }

    private func performRefresh() async throws {
        guard let current = persisted else { throw ClientError.unauthorized }
        let body = try TallyJSON.encoder().encode(RefreshRequest(refreshToken: current.refreshToken))
        do {
            let response = try await executor.send(.post("/v1/auth/refresh", authenticated: false), body: body, auth: nil)
            _ = try await adopt(try decode(SessionTokens.self, response))
        } catch ClientError.unauthorized where current.isGuest {
            // A guest is its installation secret: sign in again as the same account.
            _ = try await signInAsGuest()
        } catch ClientError.unauthorized {
            await forget()
            throw ClientError.unauthorized
        }
    }

    // MARK: State

    private func adopt(_ tokens: SessionTokens) async throws -> SessionUser {
        let previous = persisted?.userId
        try save(Persisted(userId: tokens.userId, isGuest: tokens.isGuest, refreshToken: tokens.refreshToken))
        accessToken = tokens.accessToken
        expiresAt = clock.now.addingTimeInterval(TimeInterval(tokens.expiresIn))
        if previous != tokens.userId { await userChanged(previous, tokens.userId) }
        return SessionUser(userId: tokens.userId, isGuest: tokens.isGuest)
    }

    private func forget() async {
        let previous = persisted?.userId
        persisted = nil
        accessToken = nil
        expiresAt = .distantPast
        // The installation secret stays: it is the device's guest (and its free quota), not the user's.
        try? secureStore.delete(Self.sessionItem)
        if previous != nil { await userChanged(previous, nil) }
    }

    private func save(_ session: Persisted) throws {
        persisted = session
        try secureStore.write(try JSONEncoder().encode(session), for: Self.sessionItem)
    }

    /// 32 random bytes made once per installation and kept in the secure store: never a vendor identifier.
    private func installationSecret() throws -> String {
        if let data = try secureStore.read(Self.installationItem), let secret = String(data: data, encoding: .utf8) { return secret }
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let secret = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        try secureStore.write(Data(secret.utf8), for: Self.installationItem)
        return secret
    }

    private func decode<T: Decodable>(_ type: T.Type, _ response: TransportResponse) throws -> T {
        try decodeAnswer(type, response.body)
    }
}
