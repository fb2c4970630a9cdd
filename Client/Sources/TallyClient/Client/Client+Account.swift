import Foundation
import TallyAPI

/// The account's password and email: change, reset by a mailed code, verification. Each call is one request, sent
/// once (none of them is retried by itself: a code must not be spent twice); the server mails its codes through the
/// mail hook its operator configured (docs/identity.md, "Account recovery").
///
/// A code that does not work — wrong, expired (codes live 15 minutes), already used, replaced by a newer one, or spent
/// by five wrong tries — is one error: ``ClientError/Code/server`` with ``ClientError/serverCode`` `.invalidCode`. Ask
/// for a new code then. Too many attempts are ``ClientError/Code/rateLimited``, with ``ClientError/retryAfter``.
extension Client {
    /// Changes the signed-in account's password. The current password is checked as a sign-in checks it (a wrong one
    /// throws ``ClientError/Code/invalidCredentials`` and counts towards the sign-in lockout). Every *other* device
    /// of the account is signed out; this one stays signed in.
    ///
    /// A guest has no password: ``ClientError/serverCode`` `.notLinked` (link one with ``link(email:password:)``).
    public func changePassword(current: String, new: String) async throws {
        let body = try TallyJSON.encoder().encode(ChangePasswordRequest(currentPassword: current, newPassword: new))
        do {
            _ = try await executor.send(.post("/v1/auth/password"), body: body, auth: session)
        } catch let error as ClientError where error.serverCode == .invalidCredentials {
            // The server answers 403, not 401: the access token is fine, the password is not.
            throw ClientError(
                .invalidCredentials, status: error.status, serverCode: error.serverCode, message: error.message)
        }
    }

    /// Asks the server to mail a password reset code to `email`. It answers the same whether or not an account has
    /// that email (so the app cannot tell, and must not claim either): show "if an account exists, a code is on its
    /// way". Asking again replaces the code mailed before. Needs no sign-in.
    ///
    /// ```swift
    /// try await tally.requestPasswordReset(email: email)
    /// // … the user types the code from the mail:
    /// try await tally.resetPassword(email: email, code: code, newPassword: newPassword)
    /// ```
    public func requestPasswordReset(email: String) async throws {
        let body = try TallyJSON.encoder().encode(ForgotPasswordRequest(email: email))
        _ = try await executor.send(.post("/v1/auth/password/forgot", authenticated: false), body: body, auth: nil)
    }

    /// Sets a new password with the code from the reset mail, then signs this device in to the account with it (as
    /// ``signIn(email:password:)`` does: a different user signed in here before is signed out and their local data
    /// removed). The reset signs every device of the account out, this one included — hence the sign-in.
    ///
    /// A code that does not work throws with ``ClientError/serverCode`` `.invalidCode` and changes nothing. When the
    /// reset succeeded but the sign-in that follows failed (offline, rate limited), the password *is* changed: the
    /// error is the sign-in's, and ``signIn(email:password:)`` with the new password is what is left to do.
    @discardableResult
    public func resetPassword(email: String, code: String, newPassword: String) async throws -> SessionUser {
        let body = try TallyJSON.encoder().encode(ResetPasswordRequest(email: email, code: code, newPassword: newPassword))
        _ = try await executor.send(.post("/v1/auth/password/reset", authenticated: false), body: body, auth: nil)
        return try await signIn(email: email, password: newPassword)
    }

    /// Asks the server to mail a verification code to the signed-in account's email; ``verifyEmail(code:)`` takes it.
    /// Asking again replaces the code mailed before.
    ///
    /// Refused with ``ClientError/serverCode`` `.notLinked` for a guest, `.alreadyVerified` when ``Me/emailVerified``
    /// is already true, and `.mailUnavailable` when the server sends no mail.
    public func requestEmailVerification() async throws {
        _ = try await executor.send(.post("/v1/auth/email/verify/send"), auth: session)
    }

    /// Verifies the signed-in account's email with the code from the verification mail; returns the account, its
    /// ``Me/emailVerified`` now true (the cached profile, ``meQuery``, shows it at once).
    @discardableResult
    public func verifyEmail(code: String) async throws -> Me {
        let body = try TallyJSON.encoder().encode(VerifyEmailRequest(code: code))
        let response = try await executor.send(.post("/v1/auth/email/verify"), body: body, auth: session)
        let me = try decodeAnswer(Me.self, response.body)
        confirm([Confirmation.of(meQuery, me)].compactMap { $0 })
        return me
    }
}
