import Foundation
import TallyStore

/// The rate limits of `/v1/auth/*` and Apple's account notifications (per process; see ``LimitsConfiguration``), and the log gates of the
/// refusals the store decides (the sign-in lockout, guest sign-ups per address), so that those too are
/// logged once per key and period.
struct IdentityThrottles: Sendable {
    let signInPerAddress: Throttle
    let linkPerUser: Throttle
    let linkPerAddress: Throttle
    let refreshPerSession: Throttle
    let refreshFailuresPerAddress: Throttle
    let guestSignInsPerDevice: Throttle
    /// Password reset mails asked for, per email (a keyed hash) and per address (``AccountRecoveryController``).
    let forgotPerEmail: Throttle
    let forgotPerAddress: Throttle
    /// Reset and verification codes presented, per address.
    let codeAttemptsPerAddress: Throttle
    /// Verification mails asked for, per user.
    let verificationMailsPerUser: Throttle
    /// Apple's account notifications, per address (``AppleSignInController``).
    let appleNotificationsPerAddress: Throttle
    /// App Attest challenges and attestations, per address (``DeviceIntegrity``).
    let attestationsPerAddress: Throttle
    /// One log line per (email, address) and lockout window for refusals by the lockout.
    let lockoutLog: RateLimiter
    /// One log line per address and hour for refused guest sign-ups.
    let signupLog: RateLimiter

    init(_ limits: LimitsConfiguration) {
        signInPerAddress = Throttle("sign-in per address", limits.signInPerAddress)
        linkPerUser = Throttle("link per user", limits.linkPerUser)
        linkPerAddress = Throttle("link per address", limits.linkPerAddress)
        refreshPerSession = Throttle("refresh per session", limits.refreshPerSession)
        refreshFailuresPerAddress = Throttle("refresh failures per address", limits.refreshFailuresPerAddress)
        guestSignInsPerDevice = Throttle("guest sign-in per device", limits.guestSignInsPerDevice)
        forgotPerEmail = Throttle("password reset mails per email", limits.passwordForgotPerEmail)
        forgotPerAddress = Throttle("password reset mails per address", limits.passwordForgotPerAddress)
        codeAttemptsPerAddress = Throttle("account codes per address", limits.codeAttemptsPerAddress)
        verificationMailsPerUser = Throttle("verification mails per user", limits.verificationMailsPerUser)
        appleNotificationsPerAddress = Throttle("apple id notifications per address", limits.appleIDNotificationsPerAddress)
        attestationsPerAddress = Throttle("attestations per address", limits.attestationsPerAddress)
        lockoutLog = RateLimiter(RateLimit(1, per: limits.signInLockout.window))
        signupLog = RateLimiter(RateLimit(1, per: 3600))
    }
}
