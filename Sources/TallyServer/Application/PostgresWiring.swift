import Logging
import ServiceLifecycle
import TallyPostgres
import TallyStore

/// Opens the PostgreSQL store and the service that runs its connection pool.
func makePostgresStore(url: String, poolSize: Int, logger: Logger) throws -> (store: any TallyStorage, service: any Service) {
    let store = try PostgresStore(url: url, maximumConnections: poolSize, logger: logger)
    return (store, PostgresPoolService(store: store))
}

/// Runs the PostgreSQL connection pool inside the application's service group.
struct PostgresPoolService: Service {
    let store: PostgresStore
    func run() async throws { try await store.run() }
}
