import Foundation
import Synchronization
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
        // Every status the client publishes, with the time it was seen: when the client is offline, its status says when
        // its next check is due (`retryAt`, set when the check was scheduled).
        let seen = Mutex<[(status: SyncStatus, at: Date)]>([])
        let watcher = Task {
            for await status in client.syncStatusChanges { seen.withLock { $0.append((status, Date())) } }
        }
        defer { watcher.cancel() }

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
        // Found by the client's own checks, with no app call: the edits are confirmed (a client that never checked again
        // would leave them pending until the time limit).
        try await client.waitForSync { $0.pendingMutations == 0 }
        let after = Date().timeIntervalSince(back)
        print("ServerRestartTests: the outage's 4 edits confirmed \(after) s after the restarted server first answered")
        // Why they reach it within 2 s of its return: while it was away, the active client's next check was never more
        // than 1.5 s off (``SyncSchedule/unreachableActive``). Each offline status's `retryAt` is its check's due time,
        // seen some time after it was scheduled: a slow machine only makes the distance seen shorter, while a client
        // that backed off further (the background's 60 s) shows it.
        let offline = seen.withLock { $0 }.filter { $0.status.isOffline && $0.status.retryAt != nil }
        #expect(!offline.isEmpty, "the client saw the outage and scheduled its checks")
        let farthest = offline.map { $0.status.retryAt!.timeIntervalSince($0.at) }.max() ?? 0
        #expect(farthest <= 1.5 + 0.01, "a check was scheduled \(farthest) s ahead")

        let state = try await client.pull(cursor: nil, limit: 100)
        #expect(state.changes.map(\.id).sorted() == ["n0", "n1", "n2", "n3"])
        #expect(state.lastMutationIds[try client.syncClientId] == 4)
        try await client.signOut()
    }
}
