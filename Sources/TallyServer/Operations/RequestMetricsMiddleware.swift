import Hummingbird
import Metrics

/// Counts requests and records their latency by route template, method and status, through an
/// injected metrics factory (no global bootstrap needed, so tests see the same numbers as production).
struct RequestMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let factory: any MetricsFactory

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        let route = context.endpointPath ?? "unmatched"
        let dimensions = [("route", route), ("method", request.method.rawValue), ("status", String(response.status.code))]
        Counter(label: "tally_http_requests_total", dimensions: dimensions, factory: factory).increment()
        let elapsed = ContinuousClock.now - start
        Metrics.Timer(label: "tally_http_request_duration_seconds", dimensions: [("route", route), ("method", request.method.rawValue)], factory: factory)
            .recordNanoseconds(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
        return response
    }
}
