import Logging
import ServiceLifecycle
import TallyPostgres
import TallyStore

/// Opens the PostgreSQL store, with the services that run its connection pool and the notifications that
/// carry change events between the processes sharing the database: what the others publish goes to
/// `events`; `relay` publishes this process's events to them.
func makePostgresStore(
    url: String, poolSize: Int, clock: any WallClock, events: EventHub, logger: Logger
) throws -> (store: any TallyStorage, services: [any Service], relay: @Sendable (ChangeEvent) -> Void) {
    let store = try PostgresStore(url: url, maximumConnections: poolSize, logger: logger)
    let notifications = PostgresNotifications(connection: store.pool.configuration.connection, clock: clock, logger: logger) { input in
        switch input {
        case .events(let list): for event in list { events.deliver(event) }
        case .listening(let reconnected): if reconnected { events.endAll(.stale) }
        case .eventsLost: events.endAll(.stale)
        }
    }
    return (store, [PostgresPoolService(store: store), notifications], notifications.publish)
}

/// Runs the PostgreSQL connection pool inside the application's service group.
struct PostgresPoolService: Service {
    let store: PostgresStore
    func run() async throws { try await store.run() }
}
