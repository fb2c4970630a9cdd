import Hummingbird
import Metrics
import Synchronization
import TallyAPI

/// Counts requests and records their latency by route template, method and status, through an
/// injected metrics factory (no global bootstrap needed, so tests see the same numbers as production).
/// Handlers are created once per label set and reused: creating them per request costs as much as
/// a small route.
final class RequestMetricsMiddleware<Context: RequestContext>: RouterMiddleware, Sendable {
    private struct Key: Hashable {
        let route: String
        let method: String
        let status: Int
    }

    private let factory: any MetricsFactory
    private let handlers = Mutex<[Key: (Counter, Metrics.Timer)]>([:])

    init(factory: any MetricsFactory) {
        self.factory = factory
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        let key = Key(route: context.endpointPath ?? "unmatched", method: request.method.rawValue, status: Int(response.status.code))
        let (counter, timer) = handlers(for: key)
        counter.increment()
        let elapsed = ContinuousClock.now - start
        timer.recordNanoseconds(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
        return response
    }

    private func handlers(for key: Key) -> (Counter, Metrics.Timer) {
        handlers.withLock { handlers in
            if let existing = handlers[key] { return existing }
            let made = (
                Counter(
                    label: "tally_http_requests_total",
                    dimensions: [("route", key.route), ("method", key.method), ("status", String(key.status))], factory: factory),
                Metrics.Timer(
                    label: "tally_http_request_duration_seconds", dimensions: [("route", key.route), ("method", key.method)],
                    factory: factory)
            )
            handlers[key] = made
            return made
        }
    }
}
