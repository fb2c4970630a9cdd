import Hummingbird
import Logging
import Prometheus
import TallyAPI
import TallyStore

/// `/health`, `/ready` and `/metrics`.
struct OperationsController {
    let services: TallyServices
    let registry: PrometheusCollectorRegistry

    func addRoutes(to router: Router<TallyRequestContext>) {
        router.get("health") { _, _ in JSONResponse.make(body: HealthStatus(status: "ok")) }
        router.get("ready") { _, context in
            do {
                try await services.store.ping()
                return JSONResponse.make(body: HealthStatus(status: "ok"))
            } catch {
                context.logger.warning("readiness check failed")
                return JSONResponse.make(status: .serviceUnavailable, body: HealthStatus(status: "database unreachable"))
            }
        }
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
