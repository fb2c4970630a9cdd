import ArgumentParser
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import UnixSignals
import TallyServer

/// `tally serve`: run the server until SIGTERM or SIGINT, then finish in-flight requests and stop.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the Tally server (embedded SQLite unless DATABASE_URL is set).")

    @Option(help: "Address to bind.") var host = "127.0.0.1"
    @Option(help: "Port to bind (0 picks a free one).") var port = 8080
    @Option(help: "Listen backlog (raise net.core.somaxconn to match for thousands of connects).") var backlog = 256
    @OptionGroup var store: StoreOptions

    /// How long in-flight requests get to finish after SIGTERM/SIGINT before they are cancelled, and how long
    /// cancellation may take before the process stops anyway.
    static let shutdownGrace: Duration = .seconds(10)
    static let cancellationGrace: Duration = .seconds(5)

    func run() async throws {
        // Every file the server creates (database, WAL, keys) is its user's alone.
        umask(0o077)
        var configuration = try store.configuration()
        configuration.host = host
        configuration.port = port
        configuration.backlog = backlog
        var logger = Logger(label: "tally", factory: LazyMetadataLogHandler.init(label:))
        logger.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        let admin = try AdminKey.resolve(configured: configuration.adminKey, dataDirectory: configuration.dataDirectory)
        configuration.adminKey = admin.key
        if admin.generated {
            // Never printed: stdout and stderr end up in log collectors.
            logger.notice("generated the admin key", metadata: ["file": "\(configuration.dataDirectory)/admin-key"])
        }
        let storeName = configuration.databaseURL == nil ? "SQLite in \(configuration.dataDirectory)" : "PostgreSQL"
        let host = configuration.host
        let app = try buildApplication(configuration: configuration, logger: logger) { port in
            FileHandle.standardOutput.write(Data("tally listening on http://\(host):\(port) (\(storeName))\n".utf8))
        }
        // A graceful shutdown that does not finish in time (a request stuck on a database that stopped
        // answering) is escalated to cancellation, and cancellation that does not finish to an exit.
        var group = ServiceGroupConfiguration(services: [app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        group.maximumGracefulShutdownDuration = Self.shutdownGrace
        group.maximumCancellationDuration = Self.cancellationGrace
        try await ServiceGroup(configuration: group).run()
    }
}
