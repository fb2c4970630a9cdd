import Logging
import ServiceLifecycle
import TallyPostgres
import TallyStore

/// Opens the PostgreSQL store; it is also the service that runs its connection pool.
func makePostgresStore(url: String, poolSize: Int, logger: Logger) throws -> (store: any TallyStorage, service: any Service) {
    let store = try PostgresStore(url: url, maximumConnections: poolSize, logger: logger)
    return (store, store)
}
