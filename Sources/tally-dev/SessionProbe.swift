import ArgumentParser
import Foundation
import TallyClient

/// `tally-dev sdk-session-probe` (hidden): one process of an app that shares its session store with another
/// (an app and its widget). It restores the session from a `FileSecureStore`, waits for a line on standard
/// input (so that several probes start their rounds together), then fetches the wallet `--rounds` times. Against
/// a server whose access tokens live no longer than the SDK's refresh margin (30 s), every fetch refreshes the
/// session first. Prints one JSON line: the user at the end, the rounds done, the refreshes the server granted
/// and refused, and when the rounds started and ended. Exits 1 if a round failed. The two-process test of SharedSessionTests runs it.
struct SessionProbe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sdk-session-probe", abstract: "Refresh a session shared through a file store, for the multi-process test.",
        shouldDisplay: false)

    /// What the probe prints.
    struct Report: Codable {
        var userId: String?
        var rounds: Int
        var refreshes: Int
        var refused: Int
        var error: String?
        /// When the rounds started and ended (seconds since 1970), to show that probes overlapped.
        var started: Double
        var finished: Double
    }

    @Option(help: "The FileSecureStore directory holding the session.") var store: String
    @Option(help: "The server's base URL.") var url: String
    @Option(help: "Wallet fetches to make.") var rounds = 100

    func run() async throws {
        guard let baseURL = URL(string: url) else { throw ValidationError("--url is not a URL") }
        let transport = RefreshCountingTransport(wrapping: URLSessionTransport(baseURL: baseURL))
        var configuration = ClientConfiguration(baseURL: baseURL, secureStore: try FileSecureStore(directory: URL(fileURLWithPath: store)))
        configuration.transport = transport
        configuration.metrics = ClientMetrics(exportLabel: nil)
        let client = Client(configuration: configuration)
        guard try await client.restore() != nil else { throw ValidationError("no session in \(store)") }
        _ = readLine()
        let started = Date().timeIntervalSince1970
        var done = 0
        var failure: String?
        do {
            for _ in 0..<rounds {
                _ = try await client.fetch(client.walletQuery, forceRefresh: true)
                done += 1
            }
        } catch {
            failure = String(describing: error)
        }
        let (granted, refused) = await transport.counts.values
        let report = Report(
            userId: await client.user?.userId, rounds: done, refreshes: granted, refused: refused, error: failure, started: started,
            finished: Date().timeIntervalSince1970)
        print(String(decoding: try JSONEncoder().encode(report), as: UTF8.self))
        if failure != nil { throw ExitCode.failure }
    }
}

/// Passes requests through and counts the answers to `POST /v1/auth/refresh`: granted (2xx) and refused (401,
/// which a reused refresh token gets).
private final class RefreshCountingTransport: HTTPTransport {
    actor Counts {
        private(set) var values = (granted: 0, refused: 0)
        func record(_ status: Int) {
            if (200..<300).contains(status) { values.granted += 1 }
            if status == 401 { values.refused += 1 }
        }
    }

    let counts = Counts()
    private let wrapped: any HTTPTransport

    init(wrapping wrapped: any HTTPTransport) { self.wrapped = wrapped }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let response = try await wrapped.send(request)
        if request.path == "/v1/auth/refresh" { await counts.record(response.status) }
        return response
    }
}
