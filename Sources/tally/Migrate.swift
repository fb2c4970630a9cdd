import ArgumentParser
import Foundation
import Logging
import TallyPostgres
import TallySQLite
import TallyServer
import TallyStore

/// `tally migrate`: apply pending schema migrations and exit (servers also migrate at start).
struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply pending database migrations and exit.")

    @OptionGroup var store: StoreOptions

    func run() async throws {
        umask(0o077)
        let configuration = try store.configuration()
        if let url = configuration.databaseURL {
            // On TALLY_LISTEN_DATABASE_URL when set (PostgreSQL itself, while DATABASE_URL may go through a transaction pooler).
            let postgres = try PostgresStore(
                url: url, maximumConnections: 2, statements: configuration.postgresStatements, directURL: configuration.listenDatabaseURL,
                logger: Logger(label: "tally.migrate"))
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await postgres.run() }
                try await postgres.migrate()
                group.cancelAll()
            }
        } else {
            let path = configuration.dataDirectory + "/tally.sqlite"
            try DataDirectory.prepare(configuration.dataDirectory)
            try DataDirectory.createPrivateFile(path)
            try await SQLiteStore(path: path).migrate()
        }
        print("migrations applied")
    }
}
