import Foundation
import TallyAPI

/// Every failure the SDK reports: a ``code`` to switch on and what the failure carries. Cancellation is not a
/// failure: a cancelled call throws `CancellationError`.
///
/// The code is a struct, not an enum, so a code added later never breaks an app that switches over the known ones:
///
/// ```swift
/// do {
///     try await tally.perform("ai.query")
/// } catch let error as ClientError where error.code == .insufficientTokens {
///     showPaywall(available: error.wallet?.available)
/// }
/// ```
///
/// Descriptions never include tokens, secrets or response bodies beyond the server's error message.
public struct ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kind of failure. Compare with `==`, `switch` over it, or match a thrown error with
    /// `catch ClientError.Code.unauthorized`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Base: String, Sendable {
            case offline, timedOut, unauthorized, invalidCredentials, insufficientTokens, quotaExhausted, rateLimited
            case server, invalidResponse, invalidInput, unexpected, pendingWrites, accountExists
        }
        fileprivate let base: Base
        /// The code's name.
        public var description: String { base.rawValue }

        /// No network, or the server could not be reached after the allowed retries.
        public static let offline = Code(base: .offline)
        /// The request took longer than its timeout on every attempt.
        public static let timedOut = Code(base: .timedOut)
        /// There is no signed-in user, or the server refused the session and it could not be refreshed: sign in again.
        public static let unauthorized = Code(base: .unauthorized)
        /// The email and password of a sign-in do not match an account; the current session, if any, is unchanged.
        public static let invalidCredentials = Code(base: .invalidCredentials)
        /// The wallet cannot pay for the action; ``ClientError/wallet`` and ``ClientError/quotas`` are the server's
        /// (a paywall shows these).
        public static let insufficientTokens = Code(base: .insufficientTokens)
        /// A free quota is used up and the action cannot be paid in tokens; ``ClientError/wallet`` and
        /// ``ClientError/quotas`` are the server's.
        public static let quotaExhausted = Code(base: .quotaExhausted)
        /// The server asks to slow down; ``ClientError/retryAfter`` seconds when it said so.
        public static let rateLimited = Code(base: .rateLimited)
        /// Any other refusal or failure the server reported: ``ClientError/status``, ``ClientError/serverCode`` and
        /// ``ClientError/message`` say which.
        public static let server = Code(base: .server)
        /// The server's answer could not be decoded; ``ClientError/message`` says what.
        public static let invalidResponse = Code(base: .invalidResponse)
        /// The caller passed something the SDK cannot send; ``ClientError/message`` says what.
        public static let invalidInput = Code(base: .invalidInput)
        /// A failure on this device that is none of the above, such as a secure store that cannot be read;
        /// ``ClientError/message`` describes it. The call throws the original error; a query's
        /// ``QueryState/error`` holds this.
        public static let unexpected = Code(base: .unexpected)

        /// Signing out would drop local changes to synced documents that the server has not confirmed yet:
        /// ``ClientError/pendingWrites`` says how many. Sync first (`try await tally.sync.now()`), or sign out with
        /// `discardingPendingWrites: true` to drop them.
        public static let pendingWrites = Code(base: .pendingWrites)

        /// A sign-in from a guest reached an account that already exists: ``ClientError/guest`` says what the guest would
        /// bring into it. Ask the user, then sign in again with `merge: true` (or without the guest's session).
        public static let accountExists = Code(base: .accountExists)

        /// Whether `error` is a ``ClientError`` with this code, so that `catch ClientError.Code.unauthorized` matches it.
        public static func ~= (code: Code, error: any Error) -> Bool { (error as? ClientError)?.code == code }
    }

    /// The kind of failure.
    public let code: Code
    /// What the failure carries, allocated when there is any: query states hold an error (most often none), and
    /// the cache-hit path copies them, so the error stays two words, smaller than the enum it replaced.
    private let details: Details?

    /// The HTTP status, when the server answered.
    public var status: Int? { details?.status }
    /// The server's error code, when the server answered (`http_<status>` when its body had none).
    public var serverCode: ErrorCode? { details?.serverCode }
    /// The server's error message (``Code/server``), or what was wrong (``Code/invalidResponse``,
    /// ``Code/invalidInput``, ``Code/unexpected``).
    public var message: String? { details?.message }
    /// The server's wallet at a refusal (``Code/insufficientTokens``, ``Code/quotaExhausted``).
    public var wallet: Wallet? { details?.wallet }
    /// The server's quotas at a refusal (``Code/insufficientTokens``, ``Code/quotaExhausted``).
    public var quotas: [Quota] { details?.quotas ?? [] }
    /// Seconds to wait before trying again, when the server said so (``Code/rateLimited``).
    public var retryAfter: TimeInterval? { details?.retryAfter }
    /// The local changes the server has not confirmed yet (``Code/pendingWrites``).
    public var pendingWrites: Int? { details?.pendingWrites }
    /// What the signed-in guest would bring into the account (``Code/accountExists``).
    public var guest: GuestProgress? { details?.guest }

    /// Creates an error (an app's tests can make the errors the SDK throws).
    public init(
        _ code: Code, status: Int? = nil, serverCode: ErrorCode? = nil, message: String? = nil, wallet: Wallet? = nil,
        quotas: [Quota] = [], retryAfter: TimeInterval? = nil, pendingWrites: Int? = nil, guest: GuestProgress? = nil
    ) {
        self.code = code
        let carriesNothing =
            status == nil && serverCode == nil && message == nil && wallet == nil && quotas.isEmpty && retryAfter == nil
            && pendingWrites == nil && guest == nil
        details =
            carriesNothing
            ? nil
            : Details(
                status: status, serverCode: serverCode, message: message, wallet: wallet, quotas: quotas, retryAfter: retryAfter,
                pendingWrites: pendingWrites, guest: guest)
    }

    /// Whether both have the same code and carry the same data.
    public static func == (lhs: ClientError, rhs: ClientError) -> Bool {
        lhs.code == rhs.code && lhs.details == rhs.details
    }

    /// A short description without secrets.
    public var description: String {
        switch code.base {
        case .offline: "offline: the server could not be reached"
        case .timedOut: "timed out"
        case .unauthorized: "unauthorized: sign in again"
        case .invalidCredentials: "invalid credentials: the email or password is wrong"
        case .insufficientTokens: "insufficient tokens (available \(wallet.map { String($0.available) } ?? "unknown"))"
        case .quotaExhausted: "free quota used up"
        case .rateLimited: "rate limited" + (retryAfter.map { ", retry after \(Int($0)) s" } ?? "")
        case .server: "server error \(status.map(String.init) ?? "?") \(serverCode?.rawValue ?? "?"): \(message ?? "")"
        case .invalidResponse: "invalid response: \(message ?? "")"
        case .invalidInput: "invalid input: \(message ?? "")"
        case .unexpected: "unexpected failure: \(message ?? "")"
        case .pendingWrites: "\(pendingWrites ?? 0) local changes are not synced yet"
        case .accountExists: "the account exists: sign in with merge to bring the guest's progress into it"
        }
    }

    /// The data of one failure, immutable.
    private final class Details: Sendable, Equatable {
        let status: Int?
        let serverCode: ErrorCode?
        let message: String?
        let wallet: Wallet?
        let quotas: [Quota]
        let retryAfter: TimeInterval?
        let pendingWrites: Int?
        let guest: GuestProgress?

        init(
            status: Int?, serverCode: ErrorCode?, message: String?, wallet: Wallet?, quotas: [Quota], retryAfter: TimeInterval?,
            pendingWrites: Int?, guest: GuestProgress?
        ) {
            self.status = status
            self.serverCode = serverCode
            self.message = message
            self.wallet = wallet
            self.quotas = quotas
            self.retryAfter = retryAfter
            self.pendingWrites = pendingWrites
            self.guest = guest
        }

        static func == (lhs: Details, rhs: Details) -> Bool {
            lhs === rhs
                || (lhs.status == rhs.status && lhs.serverCode == rhs.serverCode && lhs.message == rhs.message
                    && lhs.wallet == rhs.wallet && lhs.quotas == rhs.quotas && lhs.retryAfter == rhs.retryAfter
                    && lhs.pendingWrites == rhs.pendingWrites && lhs.guest == rhs.guest)
        }
    }

    /// `error` as a query's state shows it: itself when it is a ``ClientError``, ``Code/invalidResponse`` for an
    /// answer that could not be decoded, ``Code/unexpected`` for anything else. Cancellation is not a failure:
    /// callers handle it before.
    static func reported(_ error: any Error) -> ClientError {
        switch error {
        case let error as ClientError: error
        case is DecodingError: ClientError(.invalidResponse, message: "the answer could not be decoded")
        default: ClientError(.unexpected, message: String(describing: error))
        }
    }
}
