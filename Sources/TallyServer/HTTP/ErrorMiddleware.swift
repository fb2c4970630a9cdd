import Hummingbird
import Logging
import TallyAPI
import TallyStore

/// Turns every error into the API's JSON error shape. Expected failures keep their status; anything
/// unexpected is logged (type only, no values) and becomes a 500 whose body reveals nothing.
///
/// The one place a store's refusal becomes an answer: a ``StoreError`` thrown by any route (an embedding
/// app's too) is rendered here, a refusal with account state (`402 insufficient_tokens`, `quota_exhausted`)
/// with the caller's `wallet` and `quotas`, so no route needs to catch it.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Renders a refusal's quotas.
    let views: QuotaViews
    /// Where the `503`s of an unavailable store are logged, paced.
    let unavailable: UnavailableLog

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return try error.response(from: request, context: context)
        } catch let error as StoreError {
            if error.code == .unavailable { unavailable.record(error, logger: context.logger) }
            return try APIError(error, views: views).response(from: request, context: context)
        } catch let error as HTTPError {
            return try Self.map(error).response(from: request, context: context)
        } catch {
            context.logger.error("unhandled error", metadata: ["error.type": "\(type(of: error))"])
            return try APIError(.internalError, "Internal error.").response(from: request, context: context)
        }
    }

    static func map(_ error: HTTPError) -> APIError {
        switch error.status {
        case .notFound: return APIError(.notFound, "No such route.")
        case .methodNotAllowed: return APIError(.methodNotAllowed, "Method not allowed on this route.")
        case .contentTooLarge: return APIError(.bodyTooLarge, "The request body is too large.")
        case .unauthorized: return APIError(.unauthorized, "A valid access token is required.")
        default:
            if (400..<500).contains(error.status.code) {
                return APIError(.invalidJSON, "Bad request.", status: error.status)
            }
            return APIError(.internalError, "Internal error.")
        }
    }
}
