import ArgumentParser
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import TallyServer
import UnixSignals

/// `tally serve`: run the server until SIGTERM or SIGINT, then finish in-flight requests and stop.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the Tally server (embedded SQLite unless DATABASE_URL is set).")

    @Option(help: "Address to bind.") var host = "127.0.0.1"
    @Option(help: "Port to bind (0 picks a free one).") var port = 8080
    @Option(help: "Listen backlog (raise net.core.somaxconn to match for thousands of connects).") var backlog = 256
    @Option(name: .customLong("admin-host"), help: "Address of the admin listener (/metrics, /admin/v1).") var adminHost = "127.0.0.1"
    @Option(name: .customLong("admin-port"), help: "Port of the admin listener (0 picks a free one).") var adminPort = 9090
    @OptionGroup var connections: ConnectionOptions
    @OptionGroup var store: StoreOptions
    @Flag(
        name: .customLong("check-config"),
        help: "Check the configuration file, the options and the environment, print the effective configuration and exit (0: valid); nothing is started and the database is not contacted.")
    var checkConfig = false

    /// How long in-flight requests get to finish after SIGTERM/SIGINT before they are cancelled, and how long
    /// cancellation may take before the process stops anyway.
    static let shutdownGrace: Duration = .seconds(10)
    static let cancellationGrace: Duration = .seconds(5)

    func run() async throws {
        var problems: [String] = []
        let configuration = configuration(problems: &problems)
        if checkConfig { return try Self.report(configuration, problems: problems) }
        guard problems.isEmpty else { throw ConfigurationError(problems.joined(separator: "\n")) }
        try await serve(configuration)
    }

    /// The configuration from the options, the environment and `TALLY_CONFIG`; what is wrong is added to `problems`.
    func configuration(problems: inout [String]) -> TallyConfiguration {
        var configuration = store.configuration(environment: ProcessInfo.processInfo.environment, problems: &problems)
        configuration.host = host
        configuration.port = port
        configuration.backlog = backlog
        configuration.adminHost = adminHost
        configuration.adminPort = adminPort
        do { configuration.connections = try connections.settings() } catch { problems.append("\(error)") }
        return configuration
    }

    /// `LOG_LEVEL`, `info` by default.
    static var logLevel: Logger.Level {
        ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
    }

    /// `--check-config`: the effective configuration on standard output and exit 0, or the problems on standard
    /// error and exit 1.
    static func report(_ configuration: TallyConfiguration, problems: [String]) throws {
        guard problems.isEmpty else {
            FileHandle.standardError.write(Data("tally serve --check-config: the configuration is not valid:\n\(problems.joined(separator: "\n"))\n".utf8))
            throw ExitCode.failure
        }
        let text = """
            # tally serve --check-config: the configuration is valid (nothing was started).
            # Log level (LOG_LEVEL): \(logLevel)
            \(configuration.effectiveDescription)
            """
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    /// Runs the server until SIGTERM or SIGINT.
    /// Keeps the megabyte buffers of image questions (a body, its parse, the upstream copy) in glibc's heap for the
    /// next call, instead of mapping fresh zeroed pages for each and unmapping them after: the page faults, zeroing
    /// and unmapping were a third of the gateway's added time on a 0.8 MB question (`scripts/bench-ai`). Freed memory
    /// above 128 MiB is still returned; a peak of several uploads at once is bounded by `ai.requestBytesInFlight`.
    /// Only with an AI gateway (the one route that takes such bodies): the same settings cost a wallet read 3–10 % of
    /// its throughput (`GET /v1/wallet` at 256 connections, the settings removed with an `LD_PRELOAD`, alternated).
    static func keepLargeBuffers() {
        #if os(Linux)
        _ = glibcMallopt(-3, 32 << 20)  // M_MMAP_THRESHOLD, glibc's largest: bodies up to 32 MiB come from the heap
        _ = glibcMallopt(-1, 128 << 20)  // M_TRIM_THRESHOLD
        #endif
    }

    func serve(_ configuration: TallyConfiguration) async throws {
        // Every file the server creates (database, WAL, keys) is its user's alone.
        umask(0o077)
        if configuration.ai != nil { Self.keepLargeBuffers() }
        var configuration = configuration
        let sink = LogSink.standardError
        defer { sink.flush() }
        var logger = Logger(label: "tally") { LazyMetadataLogHandler(label: $0, sink: sink) }
        logger.logLevel = Self.logLevel
        let admin = try AdminKey.resolve(configured: configuration.adminKey, dataDirectory: configuration.dataDirectory)
        configuration.adminKey = admin.key
        if admin.generated {
            // Never printed: stdout and stderr end up in log collectors.
            logger.notice("generated the admin key", metadata: ["file": "\(configuration.dataDirectory)/admin-key"])
        }
        let files = OpenFileLimit.raiseToHardLimit()
        logger.info("open-file limit", metadata: ["before": "\(files.before)", "after": "\(files.after)"])
        let storeName = configuration.databaseURL == nil ? "SQLite in \(configuration.dataDirectory)" : "PostgreSQL"
        let (host, adminHost) = (configuration.host, configuration.adminHost)
        let app = try buildApplication(configuration: configuration, logger: logger) { ports in
            let lines = """
                tally listening on http://\(host):\(ports.port) (\(storeName))
                tally admin listening on http://\(adminHost):\(ports.adminPort) (/metrics, /admin/v1)

                """
            FileHandle.standardOutput.write(Data(lines.utf8))
        }
        // The flusher is first, so it stops last and writes the application's final lines. A graceful shutdown
        // that does not finish in time (a request stuck on a database that stopped answering) is escalated to
        // cancellation, and cancellation that does not finish to an exit.
        var group = ServiceGroupConfiguration(
            services: [LogFlusher(sink: sink), app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        group.maximumGracefulShutdownDuration = Self.shutdownGrace
        group.maximumCancellationDuration = Self.cancellationGrace
        try await ServiceGroup(configuration: group).run()
    }
}

/// `tally serve`'s timeouts and connection caps.
struct ConnectionOptions: ParsableArguments {
    @Option(name: .customLong("idle-timeout"), help: "Seconds a keep-alive connection may wait for its next request.")
    var idleTimeout: Double = 75
    @Option(name: .customLong("header-timeout"), help: "Seconds a request head may take (from the connection or its first byte).")
    var headerTimeout: Double = 10
    @Option(name: .customLong("request-timeout"), help: "Seconds a request body may take after its head, and an answer may wait unread.")
    var requestTimeout: Double = 30
    @Option(name: .customLong("max-connections"), help: "Connections open at once (default: the open-file limit less a reserve).")
    var maxConnections: Int?
    @Option(name: .customLong("max-connections-per-ip"), help: "Connections open at once from one client address (0: no cap).")
    var maxConnectionsPerIP = 256

    /// The settings, or a validation error naming the bad option.
    func settings() throws -> ConnectionSettings {
        var settings = ConnectionSettings()
        for (name, seconds) in [("--idle-timeout", idleTimeout), ("--header-timeout", headerTimeout), ("--request-timeout", requestTimeout)]
        where !(seconds > 0 && seconds <= 86_400) {
            throw ValidationError("\(name) must be more than 0 and at most 86400 seconds")
        }
        settings.idleTimeout = .milliseconds(Int64(idleTimeout * 1000))
        settings.headerTimeout = .milliseconds(Int64(headerTimeout * 1000))
        settings.requestTimeout = .milliseconds(Int64(requestTimeout * 1000))
        if let maxConnections, maxConnections < 1 { throw ValidationError("--max-connections must be at least 1") }
        guard maxConnectionsPerIP >= 0 else { throw ValidationError("--max-connections-per-ip must be 0 or more") }
        settings.maxConnections = maxConnections
        settings.maxConnectionsPerIP = maxConnectionsPerIP
        return settings
    }
}

#if os(Linux)
/// glibc's `mallopt(3)` (malloc.h is not in the Glibc module).
@_silgen_name("mallopt")
private func glibcMallopt(_ parameter: Int32, _ value: Int32) -> Int32
#endif
