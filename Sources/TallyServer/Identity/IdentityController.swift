import Foundation
import Hummingbird
import HummingbirdBcrypt
import Logging
import NIOPosix
import Synchronization
import TallyAPI
import TallyAppAttest
import TallyAppleID
import TallyStore

/// `/v1/auth/*` and `/v1/me`: guest identity, sessions, linking, the account.
struct IdentityController {
    let store: any TallyStorage
    /// The clock, caller keys, throttles, limits and sessions of the identity routes.
    let admission: Admission
    /// Runs `PATCH /v1/me` under its idempotency key.
    let runner: CommandRunner
    /// App Attest and DeviceCheck, for guest sign-ups.
    let integrity: DeviceIntegrity
    /// A guest merged into the account it signs in to (`merge: true`).
    let merging: GuestMerge
    /// Revokes the Apple refresh token of an account being deleted.
    let appleTokens: AppleTokenRevocation
    /// New guests per client address and hour (``MeteringConfiguration/guestSignupsPerIPPerHour``).
    let guestSignupsPerHour: Int
    /// A bcrypt hash of a random string, checked when an email has no account.
    let decoyHash: String
    /// The rate limits of these routes.
    var throttles: IdentityThrottles { admission.throttles }
    var limits: LimitsConfiguration { admission.limits }

    /// The routes over `store`, admitting callers with `admission`; makes the decoy hash (at `admission`'s bcrypt cost).
    init(
        store: any TallyStorage, admission: Admission, runner: CommandRunner, integrity: DeviceIntegrity, merging: GuestMerge,
        appleTokens: AppleTokenRevocation, guestSignupsPerHour: Int
    ) {
        self.store = store
        self.admission = admission
        self.runner = runner
        self.integrity = integrity
        self.merging = merging
        self.appleTokens = appleTokens
        self.guestSignupsPerHour = guestSignupsPerHour
        self.decoyHash = Bcrypt.hash(Secrets.random(bytes: 16), cost: admission.bcryptCost)
    }

    func addPublicRoutes(to group: RouterGroup<TallyRequestContext>) {
        group.post("auth/guest", use: guest)
        group.post("auth/refresh", use: refresh)
        group.post("auth/sign-in", use: signIn)
        group.post("auth/revoke", use: revoke)
    }

    func addRoutes(to group: RouterGroup<AuthenticatedContext>) {
        group.post("auth/link", use: link)
        group.post("auth/sign-out", use: signOut)
        group.get("me", use: me)
        group.patch("me", use: updateMe)
        group.delete("me", use: deleteMe)
    }

    @Sendable func guest(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let body = try await JSONBody<GuestSignInRequest>.read(request, context: context).value
        let deviceHash = Secrets.sha256(try Validate.deviceId(body.deviceId))
        let deviceToken = try body.deviceCheckToken.map(Validate.deviceCheckToken)
        let door = makeDoor("POST /v1/auth/guest", context.logger)
        try throttles.guestSignInsPerDevice.acquire(deviceHash, door)
        let address = admission.keys.clientAddress(request, peer: context.peer)
        // An attestation is verified before anything is stored: a refused one is 403 and changes nothing.
        var attested: AttestedKey?
        if let attestation = body.attestation, integrity.checksAssertions {
            try throttles.attestationsPerAddress.acquire(address, door)
            attested = try await integrity.verify(attestation, logger: context.logger)
        }
        let (signupGrant, markDevice) = await integrity.signupGrant(
            attested: attested != nil, deviceToken: deviceToken, logger: context.logger)
        let ipHash = admission.keys.keyedHash(address)
        let (refreshToken, record) = admission.sessions.refreshToken()
        let grant: SessionGrant
        do {
            grant = try await store.signInGuest(
                deviceHash: deviceHash, ipHash: ipHash, signupsPerHour: guestSignupsPerHour,
                signupGrant: signupGrant, sessionId: UUID().uuidString.lowercased(), refresh: record,
                sessionsPerUser: limits.sessionsPerUser, now: door.now)
        } catch let error as StoreError where error.code == .rateLimited {
            if throttles.signupLog.acquire(ipHash, now: door.now) == .allowed {
                door.logRefusal(limit: "guest sign-ups per address", key: address)
            }
            throw error
        }
        if let attested { _ = try await integrity.save(attested, userId: grant.user.id, installation: deviceHash) }
        if grant.created {
            context.logger.info("guest created", metadata: ["tally.user": .string(grant.user.id)])
            if let markDevice { await integrity.markSignupGrant(deviceToken: markDevice, logger: context.logger) }
        }
        return try await tokensResponse(grant, refreshToken: refreshToken, status: grant.created ? .created : .ok)
    }

    @Sendable func refresh(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let body = try await JSONBody<RefreshRequest>.read(request, context: context).value
        let door = makeDoor("POST /v1/auth/refresh", context.logger)
        let address = admission.keys.clientAddress(request, peer: context.peer)
        try throttles.refreshFailuresPerAddress.check(address, door)
        do {
            guard (1...512).contains(body.refreshToken.utf8.count) else { throw StoreError(.invalidRefreshToken) }
            let hash = Secrets.sha256(body.refreshToken)
            // Per session, checked before the token is used: a refused refresh leaves it valid for the retry.
            if let session = try await store.refreshTokenSession(hash: hash) {
                try throttles.refreshPerSession.acquire(session, door)
            }
            let (refreshToken, record) = admission.sessions.refreshToken()
            let grant = try await store.rotateRefreshToken(hash: hash, next: record, now: door.now)
            return try await tokensResponse(grant, refreshToken: refreshToken)
        } catch let error as StoreError where error.code == .invalidRefreshToken || error.code == .refreshTokenReused {
            throttles.refreshFailuresPerAddress.record(address, door)
            throw error
        }
    }

    @Sendable func signIn(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let read = try await JSONBody<CredentialsRequest>.read(request, context: context)
        let body = read.value
        let email = try Validate.accountEmail(body.email)
        let password = try Validate.password(body.password)
        let guest = try await guestToMerge(request, merge: body.merge)
        let door = makeDoor("POST /v1/auth/sign-in", context.logger)
        let address = admission.keys.clientAddress(request, peer: context.peer)
        try throttles.signInPerAddress.acquire(address, door)
        // The lockout counts in the database, under keyed hashes of the email and the address.
        let (accountKey, addressKey) = (admission.keys.keyedHash("email:" + email), admission.keys.keyedHash(address))
        let locksPair: Bool
        switch try await store.beginSignIn(account: accountKey, address: addressKey, policy: limits.signInLockout, now: door.now) {
        case .admit(_, _, let locks):
            locksPair = locks
        case .refuse(let retryAfter):
            if throttles.lockoutLog.acquire(accountKey + addressKey, now: door.now) == .allowed {
                logLockout("sign-in refused by the lockout", door, account: accountKey, address: address)
            }
            throw APIError.rateLimited(retryAfter: Int(saturating: retryAfter, rounding: .up))
        }
        let account = try await store.passwordHash(email: email)
        // Without an account, still spend a bcrypt check so timing does not reveal which emails exist.
        let hash = account?.passwordHash ?? decoyHash
        let matches = try await NIOThreadPool.singleton.runIfActive { Bcrypt.verify(password, hash: hash) }
        guard let account, matches else {
            if locksPair { logLockout("sign-in locked for an address", door, account: accountKey, address: address) }
            throw APIError(.invalidCredentials, "Email or password is wrong.")
        }
        try await store.signInSucceeded(account: accountKey, address: addressKey)
        var merged: MergeSummary?
        if let guest {
            try await merging.checkAttested(request, guestId: guest, body: read.raw, logger: context.logger)
            merged = try await merging.merge(guestId: guest, into: account.userId, now: door.now, logger: context.logger)
        }
        let (refreshToken, record) = admission.sessions.refreshToken()
        let grant = try await store.openSession(
            userId: account.userId, sessionId: UUID().uuidString.lowercased(), refresh: record,
            sessionsPerUser: limits.sessionsPerUser, now: door.now)
        return try await admission.sessions.answer(grant, refreshToken: refreshToken, merged: merged)
    }

    /// The guest a sign-in with `merge: true` carries into the account: the caller of the request's own access token.
    private func guestToMerge(_ request: Request, merge: Bool?) async throws -> String? {
        guard merge == true else { return nil }
        guard let caller = try await merging.caller(request) else {
            throw APIError(.invalidField, "'merge' needs the guest's access token in the Authorization header.")
        }
        return caller.userId
    }

    @Sendable func link(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let body = try await JSONBody<CredentialsRequest>.read(request, context: context).value
        guard body.merge == nil else { throw APIError(.invalidField, "'merge' is for sign-in: linking keeps the account in place.") }
        let email = try Validate.email(body.email)
        let password = try Validate.password(body.password)
        let door = makeDoor("POST /v1/auth/link", context.logger)
        try throttles.linkPerUser.acquire(context.identity.userId, door)
        try throttles.linkPerAddress.acquire(admission.keys.clientAddress(request, peer: context.peer), door)
        let cost = admission.bcryptCost
        let hash = try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(password, cost: cost) }
        let user = try await store.linkCredentials(userId: context.identity.userId, email: email, passwordHash: hash)
        context.logger.info("guest linked", metadata: ["tally.user": .string(context.identity.userId)])
        return JSONResponse.make(body: Me(user))
    }

    @Sendable func signOut(_ request: Request, context: AuthenticatedContext) async throws -> HTTPResponse.Status {
        try await store.revokeSession(id: context.identity.sessionId, now: admission.clock.now)
        admission.sessions.end(sessionId: context.identity.sessionId, of: context.identity.userId)
        return .noContent
    }

    /// Ends the session a refresh token belongs to, without an access token (RFC 7009's revocation): a device
    /// that signed out offline sends it when it is back, however long after its access token expired. Answers
    /// 204 whether or not the token was live, so it tells nothing; unknown tokens count against the address as
    /// failed refreshes do.
    @Sendable func revoke(_ request: Request, context: TallyRequestContext) async throws -> HTTPResponse.Status {
        let body = try await JSONBody<RefreshRequest>.read(request, context: context).value
        guard (1...512).contains(body.refreshToken.utf8.count) else {
            throw APIError(.invalidField, "'refreshToken' must be 1 to 512 bytes.")
        }
        let door = makeDoor("POST /v1/auth/revoke", context.logger)
        let address = admission.keys.clientAddress(request, peer: context.peer)
        try throttles.refreshFailuresPerAddress.check(address, door)
        guard let sessionId = try await store.refreshTokenSession(hash: Secrets.sha256(body.refreshToken)),
            let userId = try await store.liveSessionUser(sessionId: sessionId)
        else {
            throttles.refreshFailuresPerAddress.record(address, door)
            return .noContent
        }
        try await store.revokeSession(id: sessionId, now: door.now)
        admission.sessions.end(sessionId: sessionId, of: userId)
        return .noContent
    }

    @Sendable func me(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        guard let user = try await store.user(id: context.identity.userId) else {
            throw APIError(.unauthorized, "A valid access token is required.")
        }
        return JSONResponse.make(body: Me(user))
    }

    @Sendable func updateMe(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let body = try await JSONBody<UpdateMeRequest>.read(request, context: context).value
        let timezone = try body.timezone.map(Validate.timezone)
        let language = try body.language.map(Validate.language)
        let userId = context.identity.userId
        return try await runner.run(
            .updateProfile(userId: userId, timezone: timezone, language: language), request: request, scope: userId,
            requestFingerprint: CommandRunner.fingerprint(request, body: body)
        ) { Me($0.state.user) }
    }

    @Sendable func deleteMe(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let now = admission.clock.now
        // Read before the deletion: a running App Store subscription keeps renewing at Apple, which the answer says.
        let subscribedUntil = try await store.user(id: context.identity.userId)?.purchasedPremiumUntil.flatMap { $0 > now ? $0 : nil }
        await appleTokens.revoke(of: context.identity.userId, logger: context.logger)
        _ = try await store.deleteUser(id: context.identity.userId)
        admission.sessions.accountDeleted(context.identity.userId)
        context.logger.info("account deleted", metadata: ["tally.user": .string(context.identity.userId)])
        return JSONResponse.make(body: AccountDeletion(subscriptionActiveUntil: subscribedUntil))
    }

    private func makeDoor(_ route: String, _ logger: Logger) -> Door {
        admission.door(route, logger: logger)
    }

    /// A warning naming the account and the address only by keyed hashes.
    private func logLockout(_ message: Logger.Message, _ door: Door, account: String, address: String) {
        door.logger.warning(
            message,
            metadata: [
                "tally.route": .string(door.route), "tally.account": .string(admission.keys.logKey(account)),
                "tally.key": .string(admission.keys.logKey(address)),
            ])
    }

    private func tokensResponse(_ grant: SessionGrant, refreshToken: String, status: HTTPResponse.Status = .ok) async throws -> Response {
        try await admission.sessions.answer(grant, refreshToken: refreshToken, status: status)
    }
}
