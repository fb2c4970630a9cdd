import Foundation
import Hummingbird
import Logging
import TallyAPI
import TallyAppleID
import TallyStore

/// `POST /v1/auth/apple`: Sign in with Apple. The identity token is verified (Apple's key by `kid`, issuer, audience,
/// expiry, and the SHA-256 of the raw nonce sent) before anything in it is believed; the account is found by Apple's
/// `sub`, never by the email, which is kept only as a contact.
///
/// - A new `sub` from a caller with an access token: that account gets the Apple identity in place (a guest keeps its
///   id, wallet and history, and leaves its installation, as when linking an email); without a token: a new account.
/// - A known `sub`: sign in to its account (a revoked consent is given again). From a guest, with `merge: true` the
///   guest is merged into it first (``GuestMerge``); with `merge: false` (the user declined) the account signs in and
///   the guest stays as it was, its installation's; without `merge` the answer is 409 `account_exists` with what the
///   guest would bring, so the app can ask and send the same identity token again with the answer.
///
/// An identity token signs in once (``AppleTokenUse``, in the database: across processes): the `account_exists` answer
/// does not use it, and the guest it merged may use it again with `merge: true` (a retry, answered with the merge's
/// summary); any other second use is 401 `token_used`. An authorization code is exchanged only once the sign-in is
/// decided, and only counts when Apple's `id_token` for it names the identity token's user.
struct AppleSignInController {
    let store: any TallyStorage
    /// The clock, caller keys, throttles, limits and sessions of the identity routes.
    let admission: Admission
    /// Sign in with Apple's settings: the verifier and, when configured, the token client.
    let apple: SignInWithAppleConfiguration
    /// A guest merged into the account it signs in to (`merge: true`).
    let merging: GuestMerge
    /// Seals Apple's refresh tokens for storage.
    let storedSecrets: StoredSecrets
    /// The catalog's sign-up grant, for accounts created here.
    let signupGrant: Int64
    /// The rate limits of these routes, shared with ``IdentityController``.
    var throttles: IdentityThrottles { admission.throttles }

    func addPublicRoutes(to group: RouterGroup<TallyRequestContext>) {
        group.post("auth/apple", use: signIn)
        group.post("webhooks/apple-id", use: notification)
    }

    /// `POST /v1/webhooks/apple-id`: Apple's account notifications (no user, no key: the signature is the
    /// authentication), rate limited per client address. `consent-revoked` is a sign-out: the account's sessions end and
    /// its Apple identity stays, marked revoked, until the next Sign in with Apple with it; `account-delete` deletes the
    /// account when Apple was its only way in, else unlinks. Each acts once (by `jti`) and never on an identity linked
    /// after its event; other types, and a `sub` no account has, change nothing. 200 `{"disposition"}`; 400 for what
    /// does not verify.
    @Sendable func notification(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let body = try await JSONBody<AppleIDNotificationRequest>.read(request, context: context).value
        let door = admission.door("POST /v1/webhooks/apple-id", logger: context.logger)
        try throttles.appleNotificationsPerAddress.acquire(admission.keys.clientAddress(request, peer: context.peer), door)
        guard (1...16_384).contains(body.payload.utf8.count) else {
            throw APIError(.invalidField, "'payload' must be Apple's signed notification (at most 16 KiB).")
        }
        let now = door.now
        let event: AppleAccountEvent
        do {
            event = try await apple.verifier.verifyNotification(body.payload, now: now)
        } catch {
            if error.code == .keysUnavailable {
                throw APIError(.unavailable, "Apple's keys could not be fetched; retry later.", headers: [.retryAfter: "5"])
            }
            let code = error.code.rawValue == "malformed" ? ErrorCode.invalidSignature : ErrorCode(rawValue: error.code.rawValue)
            throw APIError(code, "The notification was refused: \(error.message)", status: .badRequest)
        }
        // Past the verifier's age window the notification is refused anyway: its id need not be kept longer.
        let notice = AppleAccountNotice(
            id: event.id, subject: event.sub, eventTime: event.eventTime,
            keepUntil: event.issuedAt.addingTimeInterval(apple.verifier.maximumNotificationAge + apple.verifier.leeway))
        var disposition = "ignored"
        switch event.type {
        case .consentRevoked:
            if let revoked = try await store.revokeAppleConsent(notice, now: now) {
                admission.sessions.end(sessionIds: revoked.revokedSessions, of: revoked.userId)
                context.logger.info("apple consent revoked", metadata: ["tally.user": .string(revoked.userId)])
                disposition = "applied"
            }
        case .accountDelete:
            switch try await store.appleAccountDeleted(notice, now: now) {
            case .deleted(let userId):
                admission.sessions.accountDeleted(userId)
                context.logger.info("account deleted by apple", metadata: ["tally.user": .string(userId)])
                disposition = "applied"
            case .unlinked(let userId):
                context.logger.info("apple identity unlinked", metadata: ["tally.user": .string(userId)])
                disposition = "applied"
            case nil: break
            }
        default: break
        }
        return JSONResponse.make(body: ["disposition": disposition])
    }

    @Sendable func signIn(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let read = try await JSONBody<AppleSignInRequest>.read(request, context: context)
        let body = read.value
        try Self.validate(body)
        let door = admission.door("POST /v1/auth/apple", logger: context.logger)
        try throttles.signInPerAddress.acquire(admission.keys.clientAddress(request, peer: context.peer), door)
        let caller = try await merging.caller(request)
        let identity = try await verified(body, now: door.now)
        let known = try await store.appleAccount(subject: identity.sub)

        // What the sign-in will do, decided before the token or the code is used: `account_exists` uses neither, so the
        // app's decision comes with the same ones.
        var mergingGuest: String?
        switch (known, caller) {
        case (let account?, let caller?) where account.id != caller.userId:
            // The caller is someone else: a guest may be merged into the account (a merged one only retry it); anyone
            // else just signs in to it.
            guard !caller.merged || body.merge == true else { throw GuestMerge.invalidToken }
            if let guest = try await store.user(id: caller.userId), guest.isGuest {
                switch body.merge {
                case true?: mergingGuest = guest.id
                case false?: break  // declined: the account signs in, the guest stays as it was on its installation
                case nil: throw try await merging.accountExists(guestId: guest.id, accountId: account.id, now: door.now)
                }
            }
        case (nil, let caller?):
            guard !caller.merged else { throw GuestMerge.invalidToken }
        default: break
        }
        if let mergingGuest { try await merging.checkAttested(request, guestId: mergingGuest, body: read.raw, logger: context.logger) }
        let refreshToken = try await exchange(body.authorizationCode, for: identity, now: door.now, logger: context.logger)
        // Remembered while the verifier would still accept the token: until `exp`, or its maximum age if that is sooner.
        let refusedAfter = min(identity.expiresAt, identity.issuedAt.addingTimeInterval(apple.verifier.maximumTokenAge))
        let use = AppleTokenUse(
            subject: identity.sub, digest: identity.tokenDigest, expiresAt: refusedAfter.addingTimeInterval(apple.verifier.leeway),
            mergingGuest: mergingGuest)
        guard try await store.useAppleToken(use, now: door.now) else {
            throw APIError(.tokenUsed, "This identity token was used already; sign in with Apple again for a new one.")
        }
        let credential = AppleCredential(subject: identity.sub, email: identity.email, refreshToken: refreshToken)

        let (sessionRefresh, record) = admission.sessions.refreshToken()
        let sessionId = UUID().uuidString.lowercased()
        var merged: MergeSummary?
        let userId: String
        switch (known, caller) {
        case (let account?, _):
            if let mergingGuest {
                merged = try await merging.merge(guestId: mergingGuest, into: account.id, now: door.now, logger: context.logger)
            }
            userId = account.id
        case (nil, let caller?):
            // A new Apple identity on the caller's account, in place.
            _ = try await store.linkApple(userId: caller.userId, credential: credential, now: door.now)
            context.logger.info("apple identity linked", metadata: ["tally.user": .string(caller.userId)])
            userId = caller.userId
        case (nil, nil):
            let grant = try await store.signInWithApple(
                credential, sessionId: sessionId, refresh: record, sessionsPerUser: admission.limits.sessionsPerUser,
                signupGrant: signupGrant, now: door.now)
            if grant.created { context.logger.info("account created with apple", metadata: ["tally.user": .string(grant.user.id)]) }
            return try await admission.sessions.answer(grant, refreshToken: sessionRefresh, status: grant.created ? .created : .ok)
        }
        // A known identity: its consent given again if Apple said it was revoked, its contact and refresh token kept.
        if known != nil { _ = try await store.appleSignedIn(credential, now: door.now) }
        let grant = try await store.openSession(
            userId: userId, sessionId: sessionId, refresh: record, sessionsPerUser: admission.limits.sessionsPerUser,
            now: door.now)
        return try await admission.sessions.answer(grant, refreshToken: sessionRefresh, merged: merged)
    }

    /// Bounds on what the request may carry (an identity token is ~1 KB; Apple's codes and nonces are short).
    static func validate(_ body: AppleSignInRequest) throws {
        guard (1...16_384).contains(body.identityToken.utf8.count) else {
            throw APIError(.invalidField, "'identityToken' must be Apple's identity token (at most 16 KiB).")
        }
        guard (16...512).contains(body.nonce.utf8.count) else {
            throw APIError(.invalidField, "'nonce' must be the raw nonce the app generated (16 to 512 bytes).")
        }
        if let code = body.authorizationCode, !(1...4_096).contains(code.utf8.count) {
            throw APIError(.invalidField, "'authorizationCode' must be Apple's authorization code (at most 4 KiB).")
        }
    }

    /// The verified identity token; a refusal is a 401 naming it (signing nobody in), Apple's keys out of reach a 503.
    private func verified(_ body: AppleSignInRequest, now: Date) async throws -> AppleIdentity {
        do {
            return try await apple.verifier.verify(identityToken: body.identityToken, rawNonce: body.nonce, now: now)
        } catch {
            if error.code == .keysUnavailable {
                throw APIError(.unavailable, "Apple's keys could not be fetched; retry later.", headers: [.retryAfter: "5"])
            }
            let code = error.code.rawValue == "malformed" ? ErrorCode.invalidSignature : ErrorCode(rawValue: error.code.rawValue)
            throw APIError(code, "The identity token was refused: \(error.message)", status: .unauthorized)
        }
    }

    /// The refresh token Apple gives for the authorization code, to revoke at account deletion, sealed for storage
    /// (``StoredSecrets``), once the `id_token` Apple answers with is verified like the identity token (key, issuer,
    /// audience, age) and names the same user: else 401 `authorization_code_mismatch` (a code taken from someone
    /// else's sign-in), before anything is stored. Nil without a code or a configured key, or when Apple refuses the
    /// code or cannot be reached (the sign-in stands: the identity token decided it; the next sign-in tries again).
    private func exchange(_ code: String?, for identity: AppleIdentity, now: Date, logger: Logger) async throws -> String? {
        guard let code, let tokens = apple.tokens else { return nil }
        let answer: AppleTokenResponse
        do {
            answer = try await tokens.exchange(authorizationCode: code, now: now)
        } catch {
            logger.warning("apple authorization code not exchanged", metadata: ["tally.reason": .string(error.code.rawValue)])
            return nil
        }
        let mismatch = APIError(
            .authorizationCodeMismatch, "The authorization code was not issued with this identity token; sign in with Apple again.")
        guard let idToken = answer.idToken else { throw mismatch }
        let issued: AppleIdentity
        do {
            issued = try await apple.verifier.verify(identityToken: idToken, rawNonce: nil, now: now)
        } catch {
            if error.code == .keysUnavailable {
                throw APIError(.unavailable, "Apple's keys could not be fetched; retry later.", headers: [.retryAfter: "5"])
            }
            logger.warning("apple id_token refused", metadata: ["tally.reason": .string(error.code.rawValue)])
            throw mismatch
        }
        guard issued.sub == identity.sub else { throw mismatch }
        return try answer.refreshToken.map { try storedSecrets.seal($0, purpose: StoredSecrets.appleRefreshToken) }
    }
}
