import Hummingbird
import Logging
import Synchronization
import TallyAPI

/// Writes one `info` line per request, `request method=GET route=/v1/wallet/holds/{holdId} status=200
/// duration_ms=0.412 user=…`: the route template (never the path as sent, never the query), and the user
/// id only for an authenticated request. Never headers, tokens, bodies or emails.
///
/// Outermost in the router, so it sees the final status of every request, errors included. The user id
/// is noted by ``AuthMiddleware``, into the ``AccessRecord`` this middleware puts in the context. Below
/// `info` it does nothing at all.
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

    /// The fields go in the message rather than in metadata, which would cost a dictionary per line.
    static func log(_ request: Request, _ context: Context, status: Int, since start: ContinuousClock.Instant, userId: String?) {
        var line = "request method="
        line.reserveCapacity(160)
        line.append(request.method.rawValue)
        line.append(" route=")
        line.append(context.endpointPath ?? "unmatched")  // Hummingbird's template: `/v1/wallet/holds/{holdId}`
        line.append(" status=")
        line.append(String(status))
        line.append(" duration_ms=")
        line.append(milliseconds(ContinuousClock.now - start))
        if let userId {
            line.append(" user=")
            line.append(userId)
        }
        context.logger.info(Logger.Message(stringLiteral: line))
    }

    /// A duration as milliseconds with three decimals, without Foundation's formatter.
    static func milliseconds(_ duration: Duration) -> String {
        let micros = duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
        let fraction = String(micros % 1000)
        return "\(micros / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
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
