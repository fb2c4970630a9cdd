import Hummingbird
import Logging
import Prometheus
import TallyAPI
import TallyStore

/// `/health` and `/ready` (on both listeners) and `/metrics` (on the admin listener only).
struct OperationsController {
    /// The database `/ready` pings.
    let store: any TallyStorage

    /// Runs `body`, or throws `CancellationError` once `timeout` has passed: a database that is down
    /// must not hold readiness probes for the connection pool's own (minute-long) timeout.
    static func withTimeout(_ timeout: Duration, _ body: @escaping @Sendable () async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw CancellationError()
            }
            try await group.next()
            group.cancelAll()
        }
    }

    /// The liveness and readiness probes.
    func addProbeRoutes(to router: Router<TallyRequestContext>) {
        router.get("health") { _, _ in JSONResponse.make(body: HealthStatus(status: "ok")) }
        router.get("ready") { _, context in
            do {
                try await Self.withTimeout(.seconds(2)) { try await store.ping() }
                return JSONResponse.make(body: HealthStatus(status: "ok"))
            } catch {
                // Debug only: a load balancer probes every few seconds, and the store logs the outage once.
                context.logger.debug("readiness check failed")
                return JSONResponse.make(status: .serviceUnavailable, body: HealthStatus(status: "database unreachable"))
            }
        }
    }

    /// Prometheus' text exposition of `registry`.
    func addMetricsRoute(to router: Router<TallyRequestContext>, registry: PrometheusCollectorRegistry) {
        router.get("metrics") { _, _ in
            var buffer: [UInt8] = []
            buffer.reserveCapacity(16 * 1024)
            registry.emit(into: &buffer)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: .init(bytes: buffer)))
        }
    }
}
