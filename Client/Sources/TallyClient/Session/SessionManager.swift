import Foundation
import TallyAPI

/// The signed-in user as the app sees it: no tokens.
public struct SessionUser: Sendable, Hashable, Codable {
    /// The server's user id.
    public var userId: String
    /// True until the account is linked to an email and password.
    public var isGuest: Bool
}

/// Owns the tokens: signs in, keeps the session in the secure store, hands out access tokens, and refreshes
/// them single-flight (fifty requests refused with 401 at once cause one refresh).
///
/// The secure store is the truth, and it may be shared with other processes (an app and its extensions). Every
/// refresh runs holding the store's ``SecureStore/lockFile`` and starts by re-reading the store: when a sibling
/// already refreshed, its fresh access token is taken as is, or its newer refresh token presented, never the
/// used one (the server would revoke the session for both). A refused token ends the session only while it is
/// still the stored one.
actor SessionManager: AccessTokenProvider {
    /// What the secure store keeps: who, the refresh token, and the latest access token (for siblings and the
    /// next launch; sessions stored by earlier versions have none).
    private struct Persisted: Codable {
        var userId: String
        var isGuest: Bool
        var refreshToken: String
        var accessToken: String?
        var expiresAt: Date?
    }

    private static let sessionItem = "session"
    private static let installationItem = "installation-secret"
    /// Refresh this long before the access token expires, so a request does not carry a dying token.
    private static let refreshMargin: TimeInterval = 30
    /// How often a refusal is retried with a refresh token that a process not holding the lock stored meanwhile.
    private static let refusalRetries = 3

    private let secureStore: any SecureStore
    private let clock: any ClientClock
    private let executor: RequestExecutor
    /// Told whenever the signed-in user changes (sign-in as someone else, sign-out, session lost).
    private let userChanged: @Sendable (_ previous: String?, _ current: String?) async -> Void

    /// The signed-in user, if any.
    private(set) var user: SessionUser?
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

    /// Loads the session kept by an earlier launch or a sibling process; its access token serves while it is fresh.
    func restore() throws -> SessionUser? {
        if user == nil, let stored = try readStored() { take(stored) }
        return user
    }

    /// Signs in as this installation's guest. The installation secret outlives sign-out, so the device's guest
    /// (and its free quota) stays the same.
    func signInAsGuest() async throws -> SessionUser {
        let previous = user?.userId
        // Under the lock: two processes signing in at first launch create one installation secret.
        let signedIn = try await exclusive { try adopt(try await guestTokens()) }
        await notify(previous)
        return signedIn
    }

    /// Signs in to a linked account with email and password.
    func signIn(email: String, password: String) async throws -> SessionUser {
        let body = try TallyJSON.encoder().encode(CredentialsRequest(email: email, password: password))
        let response = try await executor.send(.post("/v1/auth/sign-in", authenticated: false), body: body, auth: nil)
        let tokens = try decode(SessionTokens.self, response)
        let previous = user?.userId
        let signedIn = try await exclusive { try adopt(tokens) }
        await notify(previous)
        return signedIn
    }

    /// Attaches an email and password to the current (guest) account, in place: same user, same wallet.
    func link(email: String, password: String) async throws -> Me {
        let body = try TallyJSON.encoder().encode(CredentialsRequest(email: email, password: password))
        let response = try await executor.send(.post("/v1/auth/link"), body: body, auth: self)
        let me = try decode(Me.self, response)
        try await exclusive {
            // Changed as stored now: a sibling may have rotated the tokens since this process last read them.
            guard var stored = try readStored(), stored.userId == me.userId else { return }
            stored.isGuest = me.isGuest
            try write(stored)
        }
        if user?.userId == me.userId { user?.isGuest = me.isGuest }
        return me
    }

    /// Ends the session on the server (best effort) and forgets it here and in the secure store (so in the
    /// processes sharing it too); the previous user's data is cleared. The installation secret stays: it is the
    /// device's, not the user's. A refresh still in flight is cancelled: it must not bring the session back.
    func signOut() async {
        if accessToken != nil {
            _ = try? await executor.send(.post("/v1/auth/sign-out"), auth: self)
        }
        refreshing?.cancel()
        let previous = user?.userId
        do {
            try await exclusive { try secureStore.delete(Self.sessionItem) }
        } catch {
            try? secureStore.delete(Self.sessionItem)
        }
        forgetInMemory()
        await notify(previous)
    }

    // MARK: AccessTokenProvider

    func accessToken() async throws -> String {
        guard user != nil else { throw ClientError(.unauthorized) }
        if let accessToken, expiresAt.timeIntervalSince(clock.now) > Self.refreshMargin { return accessToken }
        try await refreshOnce(replacing: accessToken)
        guard let accessToken else { throw ClientError(.unauthorized) }
        return accessToken
    }

    func refresh(after token: String) async throws { try await refreshOnce(replacing: token) }

    /// Refreshes unless someone already replaced `token`; concurrent callers share one refresh.
    private func refreshOnce(replacing token: String?) async throws {
        if let token, token != accessToken { return }
        if let refreshing { return try await refreshing.value }
        let task = Task { try await self.performRefresh(replacing: token) }
        refreshing = task
        defer { refreshing = nil }
        try await task.value
    }

    private func performRefresh(replacing token: String?) async throws {
        guard user != nil else { throw ClientError(.unauthorized) }
        let previous = user?.userId
        do {
            try await exclusive { try await refreshHoldingLock(replacing: token) }
        } catch {
            // Cancelled by sign-out, which told the change itself: for the requests waiting, the session is gone.
            if Task.isCancelled { throw ClientError(.unauthorized) }
            await notify(previous)
            throw error
        }
        await notify(previous)
    }

    /// With the lock held, starting from what the store holds now (a sibling may have refreshed or signed out).
    private func refreshHoldingLock(replacing token: String?) async throws {
        for _ in 0...Self.refusalRetries {
            guard let stored = try readStored() else {
                // Signed out in a sibling process: so is this one.
                forgetInMemory()
                throw ClientError(.unauthorized)
            }
            if let access = stored.accessToken, access != token, let expiry = stored.expiresAt,
                expiry.timeIntervalSince(clock.now) > Self.refreshMargin
            {
                take(stored)  // a sibling refreshed meanwhile
                return
            }
            do {
                let body = try TallyJSON.encoder().encode(RefreshRequest(refreshToken: stored.refreshToken))
                let response = try await executor.send(.post("/v1/auth/refresh", authenticated: false), body: body, auth: nil)
                try adoptRefreshed(try decode(SessionTokens.self, response))
                return
            } catch ClientError.Code.unauthorized {
                // A token replaced in the store meanwhile was refused, not the session: retry with the stored one.
                if let current = try readStored(), current.refreshToken != stored.refreshToken { continue }
                if stored.isGuest {
                    // A guest is its installation secret: sign in again as the same account.
                    try adoptRefreshed(try await guestTokens())
                    return
                }
                try secureStore.delete(Self.sessionItem)
                forgetInMemory()
                throw ClientError(.unauthorized)
            }
        }
        throw ClientError(.unauthorized)  // the store kept changing under a writer that does not take the lock
    }

    // MARK: State

    /// Runs `body` holding the store's lock file, if it has one, so processes sharing the store take turns.
    private func exclusive<T>(_ body: () async throws -> T) async throws -> T {
        var lock: FileLock?
        if let file = secureStore.lockFile { lock = try await FileLock.acquire(file) }
        defer { lock?.release() }
        return try await body()
    }

    /// The guest sign-in answer for this installation (the caller holds the lock).
    private func guestTokens() async throws -> SessionTokens {
        let body = try TallyJSON.encoder().encode(GuestSignInRequest(deviceId: try installationSecret()))
        let response = try await executor.send(.post("/v1/auth/guest", authenticated: false), body: body, auth: nil)
        return try decode(SessionTokens.self, response)
    }

    /// Stores `tokens` and uses them (the caller holds the lock).
    private func adopt(_ tokens: SessionTokens) throws -> SessionUser {
        let session = Persisted(
            userId: tokens.userId, isGuest: tokens.isGuest, refreshToken: tokens.refreshToken, accessToken: tokens.accessToken,
            expiresAt: clock.now.addingTimeInterval(TimeInterval(tokens.expiresIn)))
        try write(session)
        take(session)
        return SessionUser(userId: session.userId, isGuest: session.isGuest)
    }

    /// Stores and uses the tokens a refresh obtained, unless sign-out cancelled it meanwhile (the caller holds the lock).
    private func adoptRefreshed(_ tokens: SessionTokens) throws {
        try Task.checkCancellation()
        _ = try adopt(tokens)
    }

    private func take(_ session: Persisted) {
        user = SessionUser(userId: session.userId, isGuest: session.isGuest)
        accessToken = session.accessToken
        expiresAt = session.expiresAt ?? .distantPast
    }

    private func forgetInMemory() {
        user = nil
        accessToken = nil
        expiresAt = .distantPast
    }

    private func notify(_ previous: String?) async {
        let current = user?.userId
        if previous != current { await userChanged(previous, current) }
    }

    private func readStored() throws -> Persisted? {
        guard let data = try secureStore.read(Self.sessionItem) else { return nil }
        return try? JSONDecoder().decode(Persisted.self, from: data)
    }

    private func write(_ session: Persisted) throws {
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
