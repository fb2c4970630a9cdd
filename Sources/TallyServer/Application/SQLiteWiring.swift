import Foundation
import Logging
import ServiceLifecycle
import TallySQLite
import TallyStore

/// Opens the embedded store under `dataDirectory` and the service that checkpoints its write-ahead log.
func makeSQLiteStore(dataDirectory: String, logger: Logger) throws -> (store: any TallyStorage, service: any Service) {
    try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
    let store = try SQLiteStore(path: (dataDirectory as NSString).appendingPathComponent("tally.sqlite"))
    return (store, SQLiteCheckpointService(store: store, logger: logger))
}

/// Checkpoints the embedded store's write-ahead log inside the application's service group, off the writer.
struct SQLiteCheckpointService: Service {
    let store: SQLiteStore
    let logger: Logger
    func run() async throws {
        try await cancelWhenGracefulShutdown { try await store.runCheckpoints(logger: logger) }
    }
}
