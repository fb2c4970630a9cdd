import ArgumentParser
import Foundation
import Hummingbird
import Logging
import TallyServer

/// `tally serve`: run the server until SIGTERM or SIGINT, then finish in-flight requests and stop.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the Tally server (embedded SQLite unless DATABASE_URL is set).")

    @Option(help: "Address to bind.") var host = "127.0.0.1"
    @Option(help: "Port to bind (0 picks a free one).") var port = 8080
    @Option(help: "Listen backlog (raise net.core.somaxconn to match for thousands of connects).") var backlog = 256
    @OptionGroup var store: StoreOptions

    func run() async throws {
        var configuration = try store.configuration()
        configuration.host = host
        configuration.port = port
        configuration.backlog = backlog
        let admin = try AdminKey.resolve(configured: configuration.adminKey, dataDirectory: configuration.dataDirectory)
        configuration.adminKey = admin.key
        if admin.generated {
            let notice = "Generated the admin key (saved in \(configuration.dataDirectory)/admin-key; shown once):\n  \(admin.key)\n"
            FileHandle.standardOutput.write(Data(notice.utf8))
        }
        var logger = Logger(label: "tally", factory: LazyMetadataLogHandler.init(label:))
        logger.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        let storeName = configuration.databaseURL == nil ? "SQLite in \(configuration.dataDirectory)" : "PostgreSQL"
        let host = configuration.host
        let app = try buildApplication(configuration: configuration, logger: logger) { port in
            FileHandle.standardOutput.write(Data("tally listening on http://\(host):\(port) (\(storeName))\n".utf8))
        }
        try await app.runService()
    }
}
