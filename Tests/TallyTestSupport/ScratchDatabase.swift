import Foundation
import Logging
import PostgresNIO
import TallyPostgres
import TallyStore

/// A PostgreSQL database of its own for one test, created next to the provisioned one and dropped afterwards.
///
/// Every Tally server sweeps expired holds and purges old idempotency keys of *all* accounts by its
/// own clock. Tests move their manual clocks days ahead, so servers sharing one database would expire
/// other tests' holds and forget their keys; a database per server keeps each test's world its own.
public enum ScratchDatabase {
    /// Creates a database on the server named by `baseURL`, runs `body` with its URL, then drops it.
    public static func with<T>(baseURL: String, _ body: (String) async throws -> T) async throws -> T {
        let name = "tally_t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await admin(baseURL, "CREATE DATABASE \(name)")
        guard var components = URLComponents(string: baseURL) else { throw HarnessError("bad database URL") }
        components.path = "/" + name
        guard let url = components.string else { throw HarnessError("bad database URL") }
        do {
            let value = try await body(url)
            try await admin(baseURL, "DROP DATABASE \(name) WITH (FORCE)")
            return value
        } catch {
            try? await admin(baseURL, "DROP DATABASE \(name) WITH (FORCE)")
            throw error
        }
    }

    /// Runs one statement on the base database (the name is generated above, never user input). A store
    /// answers `unavailable` at once while its connection attempt fails (it may time out after 3 s when the
    /// whole suite loads both cores), so the statement is tried again, up to five times.
    private static func admin(_ baseURL: String, _ sql: String) async throws {
        var logger = Logger(label: "tally.test.scratch")
        logger.logLevel = .error
        for attempt in 1...5 {
            let store = PostgresStore(configuration: try PostgresStore.configuration(url: baseURL, maximumConnections: 1), logger: logger)
            let failure: (any Error)? = try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await store.run() }
                defer { group.cancelAll() }
                do {
                    try await store.rows(PostgresQuery(unsafeSQL: sql))
                    return nil
                } catch let error as StoreError where error.code == .unavailable && attempt < 5 {
                    return error
                } catch {
                    throw HarnessError("\(sql): \(String(reflecting: error))")
                }
            }
            guard failure != nil else { return }
            try await Task.sleep(for: .milliseconds(500 * attempt))
        }
    }
}
