import Foundation
import Hummingbird
import HummingbirdBcrypt
import Logging
import NIOPosix
import TallyAPI
import TallyStore

/// Account recovery: `POST /v1/auth/password` (change), `/v1/auth/password/forgot` and `/v1/auth/password/reset`
/// (a mailed code), `/v1/auth/email/verify/send` and `/v1/auth/email/verify`.
///
/// Codes are 8 digits, live 15 minutes, work once and die after 5 wrong tries (``AccountCodePolicy``); only their
/// keyed hashes are stored. They are made and mailed off the request path (``AccountMail``), so `forgot` does the same
/// work and answers the same 202 whether or not the email has an account. Every code that is not right — wrong,
/// expired, used, superseded, spent, malformed, or for an email without an account — is one answer: 400 `invalid_code`.
/// A reset revokes every session of the account (every device signs in again, on every process), and removes the Apple
/// identity of an account whose email was not verified; a change revokes the others but the caller's. Nothing here logs an email, a code or a password.
struct AccountRecoveryController {
    let store: any TallyStorage
    /// The clock, caller keys, throttles, limits and sessions of the identity routes.
    let admission: Admission
    /// The account mails, when the configuration has a mail hook.
    let mail: AccountMail?
    /// The key the codes are hashed under (``RuntimeSecrets/accountCodeHash(_:userId:purpose:)``).
    let secrets: RuntimeSecrets
    /// 15 minutes, 5 attempts.
    let policy = AccountCodePolicy()
    /// The rate limits of these routes (per process; see ``LimitsConfiguration``).
    var throttles: IdentityThrottles { admission.throttles }

    func addPublicRoutes(to group: RouterGroup<TallyRequestContext>) {
        group.post("auth/password/forgot", use: forgot)
        group.post("auth/password/reset", use: reset)
    }

    func addRoutes(to group: RouterGroup<AuthenticatedContext>) {
        group.post("auth/password", use: changePassword)
        group.post("auth/email/verify/send", use: sendVerification)
        group.post("auth/email/verify", use: verifyEmail)
    }

    /// Checks the current password as a sign-in does (the same lockout, under the same keys), sets the new one, and
    /// revokes every other session of the account. 403 (not 401: the access token is fine) on a wrong password.
    @Sendable func changePassword(_ request: Request, context: AuthenticatedContext) async throws -> HTTPResponse.Status {
        let body = try await JSONBody<ChangePasswordRequest>.read(request, context: context).value
        let current = try Validate.password(body.currentPassword, field: "currentPassword")
        let new = try Validate.password(body.newPassword, field: "newPassword")
        let identity = context.identity
        let door = admission.door("POST /v1/auth/password", logger: context.logger)
        let email = try await linkedEmail(of: identity.userId)
        let address = admission.keys.clientAddress(request, peer: context.peer)
        let (accountKey, addressKey) = (admission.keys.keyedHash("email:" + email), admission.keys.keyedHash(address))
        if case .refuse(let retryAfter) = try await store.beginSignIn(
            account: accountKey, address: addressKey, policy: admission.limits.signInLockout, now: door.now)
        {
            throw APIError.rateLimited(retryAfter: Int(saturating: retryAfter, rounding: .up))
        }
        guard let account = try await store.passwordHash(email: email), account.userId == identity.userId else {
            throw APIError(.unauthorized, "A valid access token is required.")
        }
        let matches = try await NIOThreadPool.singleton.runIfActive { Bcrypt.verify(current, hash: account.passwordHash) }
        guard matches else { throw APIError(.invalidCredentials, "The current password is wrong.", status: .forbidden) }
        try await store.signInSucceeded(account: accountKey, address: addressKey)
        let hash = try await bcrypt(new)
        let revoked = try await store.changePassword(
            userId: identity.userId, passwordHash: hash, keepingSession: identity.sessionId, now: door.now)
        endSessions(revoked, of: identity.userId)
        context.logger.info(
            "password changed", metadata: ["tally.user": .string(identity.userId), "tally.sessions_revoked": "\(revoked.count)"])
        return .noContent
    }

    /// Always 202 and no body once the email is well-formed and within the limits: whether the email has an account,
    /// and whether a mail goes out (none without a mail hook), is decided off the request path.
    @Sendable func forgot(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let body = try await JSONBody<ForgotPasswordRequest>.read(request, context: context).value
        let email = try Validate.accountEmail(body.email)
        let door = admission.door("POST /v1/auth/password/forgot", logger: context.logger)
        try throttles.forgotPerAddress.acquire(admission.keys.clientAddress(request, peer: context.peer), door)
        try throttles.forgotPerEmail.acquire(admission.keys.keyedHash("email:" + email), door)
        if let mail, !mail.submit(.passwordReset(email: email)) { throw Self.mailQueueFull }
        return Response(status: .accepted, headers: [.cacheControl: "no-store"])
    }

    /// Sets the new password with a mailed code and signs every device out; an account whose email was not verified
    /// also loses its Apple identity (the code is the first proof the email is the user's: an Apple ID linked before
    /// may be whoever linked the email). The answer says whether it did. The new password is hashed before the account
    /// is looked up, so an email without an account answers in the time a wrong code takes.
    @Sendable func reset(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let body = try await JSONBody<ResetPasswordRequest>.read(request, context: context).value
        let email = try Validate.accountEmail(body.email)
        let new = try Validate.password(body.newPassword, field: "newPassword")
        let door = admission.door("POST /v1/auth/password/reset", logger: context.logger)
        try throttles.codeAttemptsPerAddress.acquire(admission.keys.clientAddress(request, peer: context.peer), door)
        let code = try Self.code(body.code)
        let hash = try await bcrypt(new)
        guard let account = try await store.passwordHash(email: email),
            let reset = try await store.resetPassword(
                userId: account.userId, codeHash: secrets.accountCodeHash(code, userId: account.userId, purpose: .passwordReset),
                passwordHash: hash, policy: policy, now: door.now)
        else { throw Self.invalidCode }
        endSessions(reset.revokedSessions, of: account.userId)
        context.logger.info(
            "password reset",
            metadata: [
                "tally.user": .string(account.userId), "tally.sessions_revoked": "\(reset.revokedSessions.count)",
                "tally.apple_removed": "\(reset.appleIdentityRemoved)",
            ])
        return JSONResponse.make(body: PasswordResetResult(appleSignInRemoved: reset.appleIdentityRemoved), headers: [.cacheControl: "no-store"])
    }

    /// Mails a verification code to the caller's email: 202, or 409 for a guest or an email already verified, 503
    /// without a mail hook.
    @Sendable func sendVerification(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let userId = context.identity.userId
        guard let user = try await store.user(id: userId) else { throw APIError(.unauthorized, "A valid access token is required.") }
        guard user.email != nil else { throw Self.notLinked }
        guard user.emailVerifiedAt == nil else { throw APIError(.alreadyVerified, "This account's email is already verified.") }
        guard let mail else {
            throw APIError(.mailUnavailable, "This server sends no mail: its operator has not configured a mail hook.")
        }
        let door = admission.door("POST /v1/auth/email/verify/send", logger: context.logger)
        try throttles.verificationMailsPerUser.acquire(userId, door)
        guard mail.submit(.emailVerification(userId: userId)) else { throw Self.mailQueueFull }
        return Response(status: .accepted, headers: [.cacheControl: "no-store"])
    }

    /// Redeems a verification code: the account, now verified.
    @Sendable func verifyEmail(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let body = try await JSONBody<VerifyEmailRequest>.read(request, context: context).value
        let userId = context.identity.userId
        let door = admission.door("POST /v1/auth/email/verify", logger: context.logger)
        try throttles.codeAttemptsPerAddress.acquire(admission.keys.clientAddress(request, peer: context.peer), door)
        _ = try await linkedEmail(of: userId)
        let code = try Self.code(body.code)
        guard
            let user = try await store.verifyEmail(
                userId: userId, codeHash: secrets.accountCodeHash(code, userId: userId, purpose: .emailVerification),
                policy: policy, now: door.now)
        else { throw Self.invalidCode }
        return JSONResponse.make(body: Me(user))
    }

    /// The caller's email; 401 when the account is gone, 409 `not_linked` for a guest.
    private func linkedEmail(of userId: String) async throws -> String {
        guard let user = try await store.user(id: userId) else { throw APIError(.unauthorized, "A valid access token is required.") }
        guard let email = user.email else { throw Self.notLinked }
        return email
    }

    /// Ends revoked sessions now: this process's token cache, their event streams and, through the notifier, the
    /// other processes' caches and streams (the store's revocation feed is their fallback).
    private func endSessions(_ revoked: [String], of userId: String) {
        admission.sessions.end(sessionIds: revoked, of: userId)
    }

    private func bcrypt(_ password: String) async throws -> String {
        let cost = admission.bcryptCost
        return try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(password, cost: cost) }
    }

    /// A code as it was mailed: 8 ASCII digits (surrounding spaces forgiven). Anything else is `invalid_code` too.
    static func code(_ value: String) throws -> String {
        let code = value.trimmingCharacters(in: .whitespaces)
        guard code.utf8.count == 8, code.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            throw invalidCode
        }
        return code
    }

    static let invalidCode = APIError(.invalidCode, "The code is wrong, expired or already used; ask for a new one.")
    static let notLinked = APIError(.notLinked, "This account has no email and password; link them first (POST /v1/auth/link).")
    static let mailQueueFull = APIError(
        .mailUnavailable, "Too many mails are waiting to be sent; retry later.", headers: [.retryAfter: "30"])
}
