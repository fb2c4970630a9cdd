import Foundation
import TallyServer
import Testing

/// A real `tally serve` under a low open-file limit, flooded with idle connections from one address:
/// it keeps answering, at once, without spinning.
@Suite("Connection exhaustion", .timeLimit(.minutes(3)))
struct ConnectionExhaustionTests {
    static let limit = 256
    static let flood = 1_100

    @Test("1,100 idle connections to a server limited to 256 open files: a fresh request is still answered")
    func idleFloodDoesNotStarveOtherClients() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-flood-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // Long header and idle timeouts: the flood stays connected for the whole test.
        let server = try ServerProcess(
            name: "flooded", directory: directory,
            environment: ["TALLY_ADMIN_KEY": "flood-test-admin-key-0123", "LOG_LEVEL": "info"],
            arguments: ["--header-timeout", "300", "--idle-timeout", "300", "--max-connections-per-ip", "50"],
            openFileLimit: Self.limit)
        defer { server.stop() }
        let port = try await server.ports().api

        // The test itself needs more descriptors than the server may have.
        OpenFileLimit.raiseToHardLimit()
        var idle: [RawConnection] = []
        for _ in 0..<Self.flood { idle.append(try await RawConnection.open(port: port)) }
        // Refused connections linger up to a second: this is when descriptors run short.
        let cpuBefore = try server.cpuSeconds()
        try await Task.sleep(for: .seconds(3))
        let cpu = try server.cpuSeconds() - cpuBefore
        // accept() spinning on EMFILE would take a whole core (3 s); an idle server with 1,100 connections on two loaded
        // cores was seen at 0.32 s.
        #expect(cpu < 1.0, "the server used \(cpu) s of CPU in 3 s while the flood sat idle (accept() spinning on EMFILE?)")

        // Another client is admitted and served while the flood holds its connections.
        let fresh = try await RawConnection.open(port: port, from: "127.0.0.2")
        try await fresh.send("GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
        let answer = try await fresh.response(within: .seconds(5))
        #expect(answer?.hasPrefix("HTTP/1.1 200") == true, "\(answer ?? "no answer")")
        // The flooding address gets a clear refusal, at once.
        let more = try await RawConnection.open(port: port)
        #expect(await more.closedByServer(within: .seconds(5)))
        #expect(more.received.hasPrefix("HTTP/1.1 503"), "\(more.received)")
        var stillOpen = 0
        for connection in idle where !(await connection.closedByServer(within: .zero)) { stillOpen += 1 }
        #expect(stillOpen == 50, "the flood's admitted connections (its address's cap) are still open")

        for connection in idle + [fresh] { await connection.close() }
        #expect(server.stop() == .exited(0))
        let log = server.log
        #expect(log.contains("open-file limit") && log.contains("after=\(Self.limit)"), "the limit is logged")
        #expect(log.contains("connections refused"), "refusals are logged")
        let lines = log.split(separator: "\n").filter { $0.contains("connections refused") || $0.contains("accepting paused") }
        #expect(lines.count < 20, "refusals are logged per interval, not per connection: \(lines.count) lines")
    }
}

extension ServerProcess {
    /// CPU seconds (user and system) the process has used, from `/proc`.
    func cpuSeconds() throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8)
        let fields = stat[stat.range(of: ")")!.upperBound...].split(separator: " ")
        // After the command: state is field 3, utime and stime are fields 14 and 15 (1-based, whole line).
        return (Double(fields[11])! + Double(fields[12])!) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
