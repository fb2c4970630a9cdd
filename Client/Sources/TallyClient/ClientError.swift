import Foundation
import TallyAPI

/// Every failure the SDK surfaces: one enum an app can switch on.
///
/// Descriptions never include tokens, secrets or response bodies beyond the server's error message.
public enum ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No network, or the server could not be reached after the allowed retries.
    case offline
    /// The request took longer than its timeout on every attempt.
    case timedOut
    /// There is no signed-in user, or the server refused the session and it could not be refreshed: sign in again.
    case unauthorized
    /// The email and password of a sign-in do not match an account; the current session, if any, is unchanged.
    case invalidCredentials
    /// The wallet cannot pay for the action; carries the server's authoritative wallet and quotas (a paywall shows these).
    case insufficientTokens(wallet: Wallet?, quotas: [Quota])
    /// A free quota is used up and the action cannot be paid in tokens.
    case quotaExhausted(wallet: Wallet?, quotas: [Quota])
    /// The server asks to slow down; `retryAfter` seconds when it said so.
    case rateLimited(retryAfter: TimeInterval?)
    /// Any other refusal or failure the server reported.
    case server(status: Int, code: ErrorCode, message: String)
    /// The server's answer could not be decoded.
    case invalidResponse(String)
    /// The caller passed something the SDK cannot send.
    case invalidInput(String)

    /// A short description without secrets.
    public var description: String {
        switch self {
        case .offline: "offline: the server could not be reached"
        case .timedOut: "timed out"
        case .unauthorized: "unauthorized: sign in again"
        case .invalidCredentials: "invalid credentials: the email or password is wrong"
        case .insufficientTokens(let wallet, _): "insufficient tokens (available \(wallet.map { String($0.available) } ?? "unknown"))"
        case .quotaExhausted: "free quota used up"
        case .rateLimited(let after): "rate limited" + (after.map { ", retry after \(Int($0)) s" } ?? "")
        case .server(let status, let code, let message): "server error \(status) \(code): \(message)"
        case .invalidResponse(let why): "invalid response: \(why)"
        case .invalidInput(let why): "invalid input: \(why)"
        }
    }
}
