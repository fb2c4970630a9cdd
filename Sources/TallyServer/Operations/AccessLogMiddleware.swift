import Hummingbird
import Logging
import Synchronization

/// Writes one `info` line per request: method, route template (`/v1/wallet/holds/{holdId}`, never the
/// path as sent, never the query), status, duration in milliseconds and, for an authenticated request,
/// the user id. Never headers, tokens, bodies or emails.
///
/// Outermost in the router, so it sees the final status of every request, errors included. The user id
/// is noted by ``AccessLogUserMiddleware`` behind authentication, into the ``AccessRecord`` this
/// middleware puts in the context. Below `info` it does nothing at all.
struct AccessLogMiddleware: RouterMiddleware {
    typealias Context = TallyRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard context.logger.logLevel <= .info else { return try await next(request, context) }
        let start = ContinuousClock.now
        let record = AccessRecord()
        var context = context
        context.accessRecord = record
        let response: Response
        do {
            response = try await next(request, context)
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            Self.log(request, context, status: status, since: start, userId: record.userId)
            throw error
        }
        Self.log(request, context, status: response.status.code, since: start, userId: record.userId)
        return response
    }

    static func log(_ request: Request, _ context: Context, status: Int, since start: ContinuousClock.Instant, userId: String?) {
        var metadata: Logger.Metadata = [
            "method": .string(request.method.rawValue),
            "route": .string(routeTemplate(context.endpointPath)),
            "status": .stringConvertible(status),
            "duration_ms": .string(milliseconds(ContinuousClock.now - start)),
        ]
        if let userId { metadata["user"] = .string(userId) }
        context.logger.info("request", metadata: metadata)
    }

    /// A router path in OpenAPI form (`:holdId` written `{holdId}`); "unmatched" when no route matched.
    static func routeTemplate(_ endpointPath: String?) -> String {
        guard let path = endpointPath else { return "unmatched" }
        guard path.utf8.contains(UInt8(ascii: ":")) else { return path }
        return path.split(separator: "/", omittingEmptySubsequences: false)
            .map { $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0) }
            .joined(separator: "/")
    }

    /// A duration as milliseconds with three decimals, without Foundation's formatter.
    static func milliseconds(_ duration: Duration) -> String {
        let micros = duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
        let fraction = String(micros % 1000)
        return "\(micros / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }
}

/// Notes the authenticated user in the request's ``AccessRecord``; placed right after `AuthMiddleware`.
struct AccessLogUserMiddleware: RouterMiddleware {
    typealias Context = TallyRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let record = context.accessRecord, let identity = context.identity { record.userId = identity.userId }
        return try await next(request, context)
    }
}

/// What inner middleware learns about a request for its access-log line (only allocated when access logging is on).
final class AccessRecord: Sendable {
    private let user = Mutex<String?>(nil)

    /// The authenticated user, once known.
    var userId: String? {
        get { user.withLock { $0 } }
        set { user.withLock { $0 = newValue } }
    }
}
