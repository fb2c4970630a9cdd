import ArgumentParser
import Foundation
import TallyLoad

/// `tally-dev bench-events`: many open `GET /v1/sync/events` streams, and how fast each sees its user's writes.
struct EventsBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-events",
        abstract: "Hold one event stream open per user and time each document write to its `changed` event.",
        discussion: """
            The server must declare the collection and accept the guest sign-ups (guestSignupsPerIPPerHour) and \
            connections (--max-connections-per-ip 0) from one address. Prints one JSON line of results \
            (milliseconds) on standard output.
            """)

    @Option(help: "The server's host.") var host = "127.0.0.1"
    @Option(help: "The server's port.") var port: Int
    @Option(help: "Event streams, one per user.") var users = 5_000
    @Option(help: "Document writes per second.") var rate = 500
    @Option(help: "Seconds of writes.") var duration = 20
    @Option(help: "The collection written to.") var collection: String
    @Option(help: "The collection's range key, if it has one.") var rangeKey: String?

    func run() async throws {
        var options = EventFanoutBenchmark.Options(port: port, collection: collection, rangeKey: rangeKey)
        (options.host, options.users, options.writesPerSecond, options.duration) = (host, users, rate, duration)
        let result = try await EventFanoutBenchmark.run(options) { line in
            FileHandle.standardError.write(Data("[bench-events] \(line)\n".utf8))
        }
        try BenchmarkRuns.printJSON(result)
    }
}
