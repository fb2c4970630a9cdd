import Foundation
import TallyAPI
import TallyLoad
import Testing

/// A client that asks for large pulls and never reads them must not pin the server's memory: a real `tally serve`
/// (its resident memory is what is measured), one guest holding 1,000 documents of 16 KB, 100 connections that
/// each send `GET /v1/sync/pull?limit=1000` and read nothing.
///
/// Before the fix each answer was a page of 1,000 documents (16 MB) kept in memory for as long as the client
/// liked: 100 such connections took a SQLite server from 78 to 1,892 MiB.
@Suite("Unread pulls", .timeLimit(.minutes(10)))
struct UnreadPullTests {
    /// The server's `--request-timeout`: how long an answer may wait unread.
    static let requestTimeout = 2.0
    /// How far the server's resident memory may rise above its level before the pulls: a few pages of 1 MiB being
    /// written (4 per user), their JSON and records, 100 connections' buffers, and the allocator's slack.
    static let rssBound = 64 << 20
    static let connections = 100

    @Test("Unread pulls of 16 MB of documents: memory stays under the bound, 4 at once per user, and the stalled are closed at the deadline", arguments: StoreKind.allCases)
    func unreadPulls(kind: StoreKind) async throws {
        switch kind {
        case .sqlite: try await unreadPulls(environment: [:])
        case .postgres: try await ScratchDatabase.with(baseURL: try postgresURL()) { url in try await unreadPulls(environment: ["DATABASE_URL": url]) }
        }
    }

    private func unreadPulls(environment: [String: String]) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-unread-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = directory.appendingPathComponent("tally.yaml")
        try Data("collections: [{name: blobs}]\n".utf8).write(to: config)
        let adminKey = "unread-admin-key-0123456789"
        let server = try ServerProcess(
            name: "server", directory: directory,
            environment: environment.merging(["TALLY_CONFIG": config.path, "TALLY_ADMIN_KEY": adminKey, "LOG_LEVEL": "error"]) { $1 },
            arguments: ["--request-timeout", "\(Self.requestTimeout)"])
        defer {
            // Not SIGTERM: a server that keeps unread answers would wait on them while shutting down.
            server.process.kill()
            _ = server.process.waitUntilExit()
        }
        let ports = try await server.ports()
        let api = APIConnection(port: ports.api, adminPort: ports.admin, adminKey: adminKey)
        let user = try await api.newGuest()

        // 1,000 documents of 16,000 bytes of data each (the default limit is 16,384), 50 to a push (1 MiB per push).
        let text = String(repeating: "x", count: 15_990)
        for batch in 0..<20 {
            let mutations = (0..<50).map { index in
                let n = batch * 50 + index
                return SyncMutation(id: Int64(n + 1), op: .put, collection: "blobs", docId: "d\(n)", data: .object(["n": .int(n), "t": .string(text)]))
            }
            let pushed = try await api.push(user, clientId: "unread-pull-client-1", mutations)
            try #require(pushed.status == .ok, "push: \(pushed.status) \(pushed.text.prefix(300))")
            #expect(try pushed.decode(SyncPushResponse.self).results.allSatisfy { $0.status == .applied })
        }
        // One pull read whole first, so the memory measured from here is the server's working level.
        #expect(try await api.state(user).count == 1_000)
        await api.close()

        let pid = server.process.processIdentifier
        let baseline = try Self.residentBytes(pid)
        func pull(closing: Bool) -> String {
            "GET /v1/sync/pull?limit=1000 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(user.accessToken)\r\n"
                + (closing ? "Connection: close\r\n\r\n" : "\r\n")
        }
        var peak = baseline

        // The attack as reported: 100 connections, one unread pull each. At most 4 pages of at most 1 MiB are
        // written at once (the kernel's socket buffers take them); the other 96 pulls are refused.
        var clients: [UnreadConnection] = []
        for _ in 0..<Self.connections {
            let client = try UnreadConnection(port: ports.api)
            try client.send(pull(closing: true))
            clients.append(client)
        }
        let spread = try await Self.waitUntilReleased(pid: pid, port: ports.api, baseline: baseline, peak: &peak)
        #expect(spread != nil, "the server still holds the connections after 60 s, or its memory went past the bound")
        var answered = 0
        var refused = 0
        for client in clients {
            let (bytes, ended) = await client.readToEnd(within: .seconds(10))
            #expect(ended, "a connection is still open")
            let answer = try #require(ReceivedAnswer(bytes), "no answer: \(bytes.count) bytes")
            switch answer.status {
            case 200:
                #expect(answer.complete && answer.contentLength <= PageBoundLimit.pageBytes, "a page of \(answer.contentLength) bytes")
                answered += 1
            case 429:
                #expect(answer.complete && answer.field("Retry-After") != nil, "\(answer.head)")
                refused += 1
            default:
                Issue.record("unexpected answer: \(answer.head)")
            }
        }
        #expect(answered >= 4 && answered + refused == Self.connections, "\(answered) answered, \(refused) refused")

        // Unread answers the kernel cannot take: 4 connections (the cap) each pipelining 32 pulls, 32 MiB of answers,
        // far more than a socket's buffers hold (they took 2 to 8 MiB here). Each connection stops being writable,
        // and is closed once it stayed so for the request timeout.
        let pipelined = 32
        let stalled = try (0..<4).map { _ in
            let client = try UnreadConnection(port: ports.api)
            try client.send((0..<pipelined).map { pull(closing: $0 == pipelined - 1) }.joined())
            return client
        }
        let closed = try await Self.waitUntilReleased(pid: pid, port: ports.api, baseline: baseline, peak: &peak)
        print("unread pulls: resident \(baseline >> 20) MiB before, \(peak >> 20) MiB at the peak; stalled connections closed after \(closed.map { "\($0)" } ?? "-")")
        #expect(peak - baseline <= Self.rssBound, "resident memory rose by \((peak - baseline) >> 20) MiB (bound \(Self.rssBound >> 20) MiB)")
        let after = try #require(closed, "the server still holds unread connections after 60 s, or its memory went past the bound")
        #expect(after >= .seconds(Self.requestTimeout), "closed after \(after), before the request timeout")
        for client in stalled {
            let (bytes, ended) = await client.readToEnd(within: .seconds(10))
            #expect(ended, "a stalled connection is still open")
            // Its answers, whole, then the one it was writing when it was closed, cut short.
            var rest = bytes[...]
            var complete = 0
            while let answer = ReceivedAnswer(Array(rest)), answer.complete {
                #expect(answer.status == 200, "\(answer.head)")
                complete += 1
                rest = rest.dropFirst(answer.head.utf8.count + 4 + answer.contentLength)
            }
            #expect(complete < pipelined, "every pipelined answer was sent whole")
            #expect(ReceivedAnswer(Array(rest)).map { !$0.complete } ?? rest.isEmpty, "the stream ends with a cut answer or between two")
        }
    }

    /// Waits (at most a minute) until the server holds no connection on `port`, sampling its resident memory into
    /// `peak`; returns how long that took, or nil at the time limit or as soon as the memory passes the bound
    /// (a failure: the server must not take the machine's memory).
    static func waitUntilReleased(pid: pid_t, port: Int, baseline: Int, peak: inout Int) async throws -> Duration? {
        let start = ContinuousClock.now
        while ContinuousClock.now - start < .seconds(60) {
            peak = max(peak, try residentBytes(pid))
            if peak - baseline > rssBound { return nil }
            if try heldConnections(port: port) == 0, ContinuousClock.now - start > .milliseconds(100) { return ContinuousClock.now - start }
            try await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// VmRSS of `pid`, in bytes.
    static func residentBytes(_ pid: pid_t) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
        else { throw HarnessError("no VmRSS for \(pid)") }
        return kilobytes << 10
    }

    /// TCP connections the server side of `port` still holds open (established, or closed by the client only).
    static func heldConnections(port: Int) throws -> Int {
        try UnreadConnection.serverSockets(port: port).filter { $0.state == "01" || $0.state == "08" }.count
    }
}

/// The size bounds of a pull answer, as docs/sync.md states them.
enum PageBoundLimit {
    /// A page holds at most 1 MiB of documents' data (or one document), plus up to 1,000 documents' fields and the
    /// cursor and client ids around them.
    static let pageBytes = (1 << 20) + 16_384 + 1_000 * 200 + 4_096
}
