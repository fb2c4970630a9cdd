import Foundation
import TallyLoad

/// Two `tally serve` processes on one PostgreSQL database, started at once with one configuration file, one
/// admin key and the same token signing keys (instances accept each other's tokens only with the same keys,
/// which are never kept in the database).
struct ServerPair: Sendable {
    let processes: [ServerProcess]
    /// Each process's listeners, in order.
    let ports: [(api: Int, admin: Int)]
    let adminKey: String

    /// Starts the pair on `url` with `config` (YAML or JSON) as `TALLY_CONFIG`, `extraEnvironment` added to
    /// theirs and `arguments` to `tally serve`'s, runs `body`, and stops both.
    static func with<T: Sendable>(
        url: String, config: String, extraEnvironment: [String: String] = [:], arguments: [String] = [], _ body: (ServerPair) async throws -> T
    ) async throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-pair-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("tally.yaml")
        try Data(config.utf8).write(to: file)
        let adminKey = "server-pair-admin-key-\(UUID().uuidString.prefix(8))"
        let signingKey = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        let environment = [
            "DATABASE_URL": url, "TALLY_CONFIG": file.path, "TALLY_ADMIN_KEY": adminKey, "TALLY_SIGNING_KEY": signingKey,
            "LOG_LEVEL": "warning",
        ].merging(extraEnvironment) { _, extra in extra }
        let processes = [
            try ServerProcess(name: "a", directory: directory, environment: environment, arguments: arguments),
            try ServerProcess(name: "b", directory: directory, environment: environment, arguments: arguments),
        ]
        defer { for process in processes { process.stop() } }
        var ports: [(api: Int, admin: Int)] = []
        for process in processes { ports.append(try await process.ports()) }
        return try await body(ServerPair(processes: processes, ports: ports, adminKey: adminKey))
    }

    /// A new connection to process `index`.
    func connection(_ index: Int) -> APIConnection {
        APIConnection(port: ports[index].api, adminPort: ports[index].admin, adminKey: adminKey)
    }

    /// Stops both with SIGTERM; their exit statuses (0: a graceful shutdown).
    func stop() -> [ChildProcess.Termination] { processes.map { $0.stop() } }
}
