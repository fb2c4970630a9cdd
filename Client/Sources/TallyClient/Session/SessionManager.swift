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
    /// Refresh tokens of sessions signed out here whose revocation the server has not confirmed yet.
    private static let revocationsItem = "pending-revocations"
    /// The most revocations kept waiting; older ones are dropped (their sessions still expire on the server).
    static let maxPendingRevocations = 16
    /// The longest wait between deliveries of revocations when nothing says the server is back, in seconds.
    static let revocationRetry: TimeInterval = 60
    /// Refresh this long before the access token expires, so a request does not carry a dying token.
    private static let refreshMargin: TimeInterval = 30
    /// How often a refusal is retried with a refresh token that a process not holding the lock stored meanwhile.
    private static let refusalRetries = 3

    private let secureStore: any SecureStore
    private let clock: any TallyClock
    private let executor: RequestExecutor
    /// Told whenever the signed-in user changes (sign-in as someone else, sign-out, session lost), one change at a time,
    /// in the order they happened (``notify()``).
    private let userChanged: @Sendable (_ previous: String?, _ current: String?) async -> Void
    /// The user the last change told about (``notify()``), and that change, running or done.
    private var announced: String?
    private var announcing: Task<Void, Never>?

    /// The signed-in user, if any.
    private(set) var user: SessionUser?
    private var accessToken: String?
    private var expiresAt = Date.distantPast
    /// The refresh in flight, if any, and its number.
    private var refreshing: (id: UInt64, task: Task<Void, any Error>)?
    private var refreshes: UInt64 = 0
    /// The task delivering the revocations, if one runs.
    private var delivery: Task<Void, Never>?
    /// Signs that the server is back, which end the delivery's wait after an outage.
    private let reachability: Reachability
    /// Sends revocations with one attempt each: they are retried at the next sign that the server is back, not
    /// by backoff inside a sign-out.
    private let revocations: RequestExecutor

    /// Starts the activity a locked section runs as (``ExpiringActivity/begin(_:)``; tests expire it by hand).
    private let activities: @Sendable (String) -> ExpiringActivity
    /// Attests the installation at its guest sign-in (App Attest, DeviceCheck), when the client is configured to.
    private let attestor: Attestor?

    init(
        secureStore: any SecureStore, clock: any TallyClock, executor: RequestExecutor, reachability: Reachability,
        attestor: Attestor? = nil, userChanged: @escaping @Sendable (String?, String?) async -> Void,
        activities: @escaping @Sendable (String) -> ExpiringActivity = ExpiringActivity.begin
    ) {
        self.activities = activities
        self.attestor = attestor
        self.reachability = reachability
        self.secureStore = secureStore
        self.clock = clock
        self.executor = executor
        self.userChanged = userChanged
        revocations = RequestExecutor(
            transport: executor.transport, clock: clock, retry: .none, timeouts: executor.timeouts,
            metrics: executor.metrics, random: executor.random)
    }

    /// Loads the session kept by an earlier launch or a sibling process (its access token serves while it is fresh), and
    /// tells the change of user as a sign-in does.
    func restore() async throws -> SessionUser? {
        if user == nil, let stored = try readStored() { take(stored) }
        await notify()
        return user
    }

    /// Signs in as this installation's guest. The installation secret outlives sign-out, so the device's guest
    /// (and its free quota) stays the same.
    func signInAsGuest() async throws -> SessionUser {
        // Under the lock: two processes signing in at first launch create one installation secret.
        let signedIn = try await exclusive { try adopt(try await guestTokens()) }
        await notify()
        return signedIn
    }

    /// Signs in to a linked account with email and password.
    func signIn(email: String, password: String) async throws -> SessionUser {
        let body = try TallyJSON.encoder().encode(CredentialsRequest(email: email, password: password))
        let response = try await executor.send(.post("/v1/auth/sign-in", authenticated: false), body: body, auth: nil)
        let tokens = try decode(SessionTokens.self, response)
        let signedIn = try await exclusive { try adopt(tokens) }
        await notify()
        return signedIn
    }

    /// Signs in with Sign in with Apple, as the signed-in user when there is one (a guest then becomes the Apple
    /// account in place, or — `merge` — is merged into the existing one), and adopts the answer's session.
    /// `beforeSwitch` runs with the answer before the client switches users.
    func signInWithApple(_ request: AppleSignInRequest, beforeSwitch: @Sendable (SessionTokens) -> Void) async throws -> SessionTokens {
        try await signIn("/v1/auth/apple", TallyJSON.encoder().encode(request), asCaller: user != nil, beforeSwitch: beforeSwitch)
    }

    /// Signs in with an email and password carrying the signed-in guest into the account (`merge: true`), and adopts
    /// the answer's session. `beforeSwitch` runs with the answer before the client switches users.
    func signInMerging(email: String, password: String, beforeSwitch: @Sendable (SessionTokens) -> Void) async throws -> SessionTokens {
        let request = CredentialsRequest(email: email, password: password, merge: true)
        return try await signIn("/v1/auth/sign-in", TallyJSON.encoder().encode(request), asCaller: user != nil, beforeSwitch: beforeSwitch)
    }

    /// Posts a sign-in to `path`, with the current session's token when `asCaller`, and adopts the answer's session.
    private func signIn(
        _ path: String, _ body: Data, asCaller: Bool, beforeSwitch: @Sendable (SessionTokens) -> Void
    ) async throws -> SessionTokens {
        let response = try await executor.send(.post(path, authenticated: asCaller), body: body, auth: asCaller ? self : nil)
        let tokens = try decode(SessionTokens.self, response)
        beforeSwitch(tokens)
        _ = try await exclusive { try adopt(tokens) }
        await notify()
        return tokens
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

    /// Forgets the session here and in the secure store (so in the processes sharing it too) at once, without a
    /// request, and queues its refresh token for revocation on the server (``deliverRevocations()``, which the
    /// client runs now and whenever the server is reachable again); the previous user's data is cleared. The
    /// installation secret stays: it is the device's, not the user's. A refresh still in flight is cancelled: it
    /// must not bring the session back.
    func signOut() async {
        refreshing?.task.cancel()
        do {
            try await exclusive {
                if let stored = try readStored() { try queueRevocation(stored.refreshToken) }
                try secureStore.delete(Self.sessionItem)
            }
        } catch {
            try? secureStore.delete(Self.sessionItem)
        }
        forgetInMemory()
        await notify()
    }

    /// Deletes the account on the server (`DELETE /v1/me`, which ends every session of it), then forgets the
    /// session and the installation secret here and in the secure store, and clears the user's data: nothing of
    /// the account stays on the device. Throws, changing nothing here, when the server did not delete it.
    func deleteAccount() async throws -> AccountDeletion {
        let response = try await executor.send(Endpoint(method: "DELETE", path: "/v1/me", operation: "DELETE /v1/me", kind: .write), auth: self)
        // A server before this answer said 204 and nothing: no subscription known.
        let deletion = (try? decode(AccountDeletion.self, response)) ?? AccountDeletion(subscriptionActiveUntil: nil)
        refreshing?.task.cancel()
        do {
            try await exclusive {
                try secureStore.delete(Self.sessionItem)
                try secureStore.delete(Self.installationItem)
            }
        } catch {
            try? secureStore.delete(Self.sessionItem)
            try? secureStore.delete(Self.installationItem)
        }
        await attestor?.forgetInstallation()  // the next guest is another installation: a new App Attest key
        forgetInMemory()
        await notify()
        return deletion
    }

    // MARK: Revocations

    /// Sends the revocations that sign-outs queued (`POST /v1/auth/revoke` with each refresh token), oldest first,
    /// one attempt each; a token is dropped from the queue once the server answered for it (204, or refused it as
    /// bad input), and the rest wait when the server could not be reached. Returns how many are left.
    @discardableResult
    func deliverRevocations() async -> Int { await sendRevocations() }

    /// Delivers the queued revocations in a task of the session's own, without waiting for it, when there are any:
    /// after a pass that could not reach the server it waits for a sign that the server is back (any answered
    /// request, the event stream connecting, the app becoming active, a network change), at most a minute, and
    /// tries again, until the queue is empty.
    func scheduleRevocations() {
        guard delivery == nil, let queued = try? readRevocations(), !queued.isEmpty else { return }
        delivery = Task {
            while true {
                let generation = reachability.generation
                guard await self.sendRevocations() > 0, !Task.isCancelled else { break }
                guard (try? await reachability.wait(Self.revocationRetry, .unreachable, after: generation)) != nil else { break }
            }
            self.deliveryEnded()
        }
    }

    private func deliveryEnded() { delivery = nil }

    /// Waits for the delivery ``scheduleRevocations()`` started, if one runs (tests).
    func deliveryFinished() async { await delivery?.value }

    private func sendRevocations() async -> Int {
        for token in (try? readRevocations()) ?? [] {
            do {
                let body = try TallyJSON.encoder().encode(RefreshRequest(refreshToken: token))
                _ = try await revocations.send(.post("/v1/auth/revoke", authenticated: false), body: body, auth: nil)
            } catch let error as ClientError where Self.isFinal(error) {
                // Answered: the server will never take this token (it is not one). Dropped below.
            } catch {
                break
            }
            try? await exclusive { try writeRevocations(try readRevocations().filter { $0 != token }) }
        }
        return (try? readRevocations().count) ?? 0
    }

    /// Whether the server answered a revocation for good (a 4xx other than 408 and 429).
    private static func isFinal(_ error: ClientError) -> Bool {
        guard let status = error.status else { return false }
        return (400..<500).contains(status) && status != 408 && status != 429
    }

    /// Adds `refreshToken` to the revocations to send (the caller holds the lock); the oldest beyond
    /// ``maxPendingRevocations`` are dropped (their sessions expire on the server by themselves).
    private func queueRevocation(_ refreshToken: String) throws {
        var queued = try readRevocations().filter { $0 != refreshToken }
        queued.append(refreshToken)
        try writeRevocations(Array(queued.suffix(Self.maxPendingRevocations)))
    }

    private func readRevocations() throws -> [String] {
        guard let data = try secureStore.read(Self.revocationsItem) else { return [] }
        return (try? JSONDecoder().decode([String].self, from: data)) ?? []
    }

    private func writeRevocations(_ tokens: [String]) throws {
        if tokens.isEmpty { return try secureStore.delete(Self.revocationsItem) }
        try secureStore.write(try JSONEncoder().encode(tokens), for: Self.revocationsItem)
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

    /// ``accessToken()`` for work done for `userId` (its sync, its event stream, its background reads): refused once
    /// another user, or none, is signed in, so that work started for a user who left never acts as the next one.
    func accessToken(of userId: String) async throws -> String {
        guard user?.userId == userId else { throw Self.userLeft }
        let token = try await accessToken()
        guard user?.userId == userId else { throw Self.userLeft }
        return token
    }

    /// ``refresh(after:)`` for work done for `userId`: refused once another user, or none, is signed in.
    func refresh(after token: String, of userId: String) async throws {
        guard user?.userId == userId else { throw Self.userLeft }
        try await refresh(after: token)
    }

    /// The tokens of `userId`'s session only (see ``accessToken(of:)``).
    nonisolated func tokens(of userId: String) -> UserTokens { UserTokens(session: self, userId: userId) }

    private static let userLeft = ClientError(.unauthorized, message: "the user this work was for has signed out")

    /// Refreshes unless someone already replaced `token`; concurrent callers share one refresh. A caller that is
    /// cancelled stops waiting at once and the refresh goes on: a change of user cancels the leaving user's work and
    /// waits for it to end, and a refresh that lost the session waits for that change.
    private func refreshOnce(replacing token: String?) async throws {
        if let token, token != accessToken { return }
        if let refreshing { return try await valueUnlessCancelled(of: refreshing.task) }
        refreshes += 1
        let id = refreshes
        let task = Task {
            do {
                try await self.performRefresh(replacing: token)
            } catch {
                self.refreshEnded(id)
                throw error
            }
            self.refreshEnded(id)
        }
        refreshing = (id, task)
        try await valueUnlessCancelled(of: task)
    }

    /// The refresh `id` ended: the next caller starts a new one. Cleared by the refresh itself, not by the caller that
    /// started it, who may have stopped waiting: two refreshes at once would present one refresh token twice.
    private func refreshEnded(_ id: UInt64) {
        if refreshing?.id == id { refreshing = nil }
    }

    private func performRefresh(replacing token: String?) async throws {
        guard user != nil else { throw ClientError(.unauthorized) }
        do {
            try await exclusive { try await refreshHoldingLock(replacing: token) }
        } catch {
            // Cancelled by sign-out, which told the change itself: for the requests waiting, the session is gone.
            if Task.isCancelled { throw ClientError(.unauthorized) }
            await notify()
            throw error
        }
        await notify()
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
                try adoptRefreshed(try decode(SessionTokens.self, response), over: stored)
                return
            } catch ClientError.Code.unauthorized {
                // A token replaced in the store meanwhile was refused, not the session: retry with the stored one.
                if let current = try readStored(), current.refreshToken != stored.refreshToken { continue }
                if stored.isGuest {
                    // A guest is its installation secret: sign in again as the same account. When the installation's
                    // guest is another one now (this one was merged into an account, or deleted), the session ends as
                    // any other does: becoming a new guest is the app's call, not a refresh's.
                    let tokens = try await guestTokens()
                    if tokens.userId == stored.userId { return try adoptRefreshed(tokens, over: stored) }
                }
                if let current = try readStored(), current.refreshToken != stored.refreshToken { return take(current) }
                try secureStore.delete(Self.sessionItem)
                forgetInMemory()
                throw ClientError(.unauthorized)
            }
        }
        throw ClientError(.unauthorized)  // the store kept changing under a writer that does not take the lock
    }

    // MARK: State

    /// Runs `body` holding the store's lock file, if it has one, so processes sharing the store take turns. The lock
    /// file lives in the App Group container, and iOS kills a process suspended while it holds a lock there
    /// (`0xDEAD10CC`): the section runs as an ``ExpiringActivity``, and when the system expires it the lock is let go
    /// at once; `body` goes on, and what it writes then is checked against the store as a sibling's write would be.
    private func exclusive<T>(_ body: () async throws -> T) async throws -> T {
        guard let file = secureStore.lockFile else { return try await body() }
        let activity = activities("Tally session")
        defer { activity.end() }
        let lock = ReleasableLock(try await FileLock.acquire(file))
        defer { lock.release() }
        activity.onExpiry { lock.release() }
        return try await body()
    }

    /// The guest sign-in answer for this installation (the caller holds the lock).
    private func guestTokens() async throws -> SessionTokens {
        let (deviceId, executor) = (try installationSecret(), executor)
        let send: @Sendable (GuestSignInRequest) async throws -> SessionTokens = { request in
            let body = try TallyJSON.encoder().encode(request)
            let response = try await executor.send(.post("/v1/auth/guest", authenticated: false), body: body, auth: nil)
            return try decodeAnswer(SessionTokens.self, response.body)
        }
        guard let attestor else { return try await send(GuestSignInRequest(deviceId: deviceId)) }
        return try await attestor.signInAsGuest(deviceId: deviceId, send: send)  // with an attestation until one is accepted
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

    /// Stores and uses the tokens a refresh of `stored` obtained, unless sign-out cancelled it meanwhile, or `stored` is
    /// no longer the session stored: a sign-in or sign-out that came while the refresh waited for its answer wins (a
    /// writer without the lock — this process's own sign-in when the store has no lock file — may store in between). The
    /// caller holds the lock.
    private func adoptRefreshed(_ tokens: SessionTokens, over stored: Persisted) throws {
        try Task.checkCancellation()
        guard let current = try readStored() else {
            forgetInMemory()
            throw ClientError(.unauthorized)
        }
        guard current.refreshToken == stored.refreshToken else { return take(current) }
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

    /// Tells the client that the signed-in user changed, if it did since the last change told, and returns once every
    /// change told so far has been handled. Changes are told one at a time, in the order the state changed here (each
    /// is queued while this actor runs, behind the one before): actor methods interleave at their suspensions, so a
    /// sign-in, a sign-out and a refresh that lost the session can overlap, and their changes must not.
    private func notify() async {
        let current = user?.userId
        if current != announced {
            let (previous, prior, change) = (announced, announcing, userChanged)
            announced = current
            announcing = Task {
                await prior?.value
                await change(previous, current)
            }
        }
        await announcing?.value
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

/// One user's tokens (``SessionManager/tokens(of:)``): what work done for that user sends, refused once they left.
struct UserTokens: AccessTokenProvider {
    let session: SessionManager
    let userId: String

    func accessToken() async throws -> String { try await session.accessToken(of: userId) }

    func refresh(after token: String) async throws { try await session.refresh(after: token, of: userId) }
}
