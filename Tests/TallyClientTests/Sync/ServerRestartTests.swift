import Foundation
import TallyAPI
import TallyLoad
import TallyTestSupport
import Testing

@testable import TallyClient

/// The field test's outage, for real: a `tally serve` process stopped for 75 s of wall-clock time while the app keeps
/// writing, then started again on the same port and data. The client runs on the system clock, with nothing
/// injected: its own checks find the server's return, and the edits are on the server within 2 s of its first answer.
@Suite("A real tally serve stopped for 75 s and restarted", .timeLimit(.minutes(4)))
struct ServerRestartTests {
    /// `tally serve` on SQLite in `directory`, its API on `port` (0: any), declaring `notes`.
    static func serve(_ directory: URL, port: Int, name: String) throws -> (ChildProcess, log: URL) {
        let config = directory.appendingPathComponent("tally.yaml")
        try Data("collections: [{name: notes, rangeKey: date}]\n".utf8).write(to: config)
        let log = directory.appendingPathComponent("\(name).log")
        let process = try ChildProcess(
            TallyBinary.path,
            arguments: ["serve", "--port", "\(port)", "--admin-port", "0", "--data-dir", directory.appendingPathComponent("data").path],
            environment: ProcessInfo.processInfo.environment.filter { $0.key != "DATABASE_URL" }
                .merging(["TALLY_CONFIG": config.path, "LOG_LEVEL": "error"]) { $1 },
            standardOutput: .file(log), standardError: .file(log))
        return (process, log)
    }

    /// The API port the process printed (waiting up to 60 s for it).
    static func port(_ process: ChildProcess, log: URL) async throws -> Int {
        let prefix = "tally listening on http://"
        for _ in 0..<600 {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }),
                let port = line.dropFirst(prefix.count).prefix(while: { $0 != " " }).split(separator: ":").last.flatMap({ Int($0) })
            {
                return port
            }
            guard process.isRunning else { throw TestFailure("tally serve exited: \(text)") }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw TestFailure("tally serve printed no port")
    }

    @Test("Stopped 75 s: the edits made meanwhile reach it within 2 s of its first answer, with no app call")
    func editsResumeAfterARealRestart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-restart-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var (server, log) = try Self.serve(directory, port: 0, name: "first")
        defer { server.kill() }
        let port = try await Self.port(server, log: log)
        let baseURL = URL(string: "http://127.0.0.1:\(port)")!

        var configuration = ClientConfiguration(baseURL: baseURL, secureStore: MemorySecureStore())
        configuration.collections = [SyncedCollectionSpec("notes", rangeKey: "date")]
        configuration.documentsDirectory = directory.appendingPathComponent("device")
        configuration.metrics = ClientMetrics(exportLabel: nil)
        configuration.timeZone = nil
        let client = Client(configuration: configuration)
        try await client.signInAsGuest()
        try await client.waitUntilSynced()
        let notes = client.collection("notes", of: Note.self)

        server.terminate()
        _ = server.waitUntilExit()
        let stopped = Date()
        try notes.put(id: "n0", Note(date: "2027-01-01", text: "as the server stopped"))
        for (second, id) in [(10.0, "n1"), (40, "n2"), (70, "n3")] {
            try await Task.sleep(for: .seconds(max(0, second - Date().timeIntervalSince(stopped))))
            try notes.put(id: id, Note(date: "2027-01-0\(id.dropFirst())", text: "written during the outage"))
        }
        try await Task.sleep(for: .seconds(max(0, 75 - Date().timeIntervalSince(stopped))))
        #expect(client.syncStatus.pendingMutations == 4 && client.syncStatus.isOffline)

        (server, log) = try Self.serve(directory, port: port, name: "second")
        // The server's first answer, as any HTTP client sees it (these checks are not the app's).
        let probe = URLSessionTransport(baseURL: baseURL)
        var answered: Date?
        for _ in 0..<6_000 where answered == nil {
            if (try? await probe.send(TransportRequest(method: "GET", path: "/health", timeout: 1)))?.status == 200 {
                answered = Date()
            } else {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        let back = try #require(answered, "the restarted server never answered")
        try await client.waitForSync { $0.pendingMutations == 0 }
        let after = Date().timeIntervalSince(back)
        print("ServerRestartTests: the outage's 4 edits confirmed \(after) s after the restarted server first answered")
        #expect(after <= 2, "\(after) s")

        let state = try await client.pull(cursor: nil, limit: 100)
        #expect(state.changes.map(\.id).sorted() == ["n0", "n1", "n2", "n3"])
        #expect(state.lastMutationIds[try client.syncClientId] == 4)
        try await client.signOut()
    }
}
