import ArgumentParser
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import TallyAPI
import TallyClient
import TallyServer
import UnixSignals

/// `tally-dev demo`: a server on the embedded default and an app session driven through the SDK,
/// printing the balance timeline — optimistic, confirmed, rolled back.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start a throwaway server (SQLite) and walk the client SDK through an AI-assistant session.")

    func run() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-demo-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = TallyConfiguration()
        configuration.port = 0
        configuration.adminPort = 0
        configuration.dataDirectory = directory.appendingPathComponent("server").path
        configuration.adminKey = UUID().uuidString + UUID().uuidString
        var logger = Logger(label: "tally.demo")
        logger.logLevel = .error
        let (ports, portContinuation) = AsyncStream.makeStream(of: ListenerPorts.self)
        let app = try buildApplication(configuration: configuration, logger: logger) { portContinuation.yield($0) }
        let services = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await services.run() }
            var iterator = ports.makeAsyncIterator()
            guard let bound = await iterator.next() else { return }
            try await session(ports: bound, adminKey: configuration.adminKey!, directory: directory)
            await services.triggerGracefulShutdown()
            try await group.waitForAll()
        }
    }

    private func session(ports: ListenerPorts, adminKey: String, directory: URL) async throws {
        let baseURL = URL(string: "http://127.0.0.1:\(ports.port)")!
        let adminURL = URL(string: "http://127.0.0.1:\(ports.adminPort)")!
        print("server  http://127.0.0.1:\(ports.port) (SQLite, price list: ai.query = 3 tokens, 3 free readings a day)")
        let client = Client(
            configuration: ClientConfiguration(
                baseURL: baseURL, secureStore: try FileSecureStore(directory: directory.appendingPathComponent("keychain")),
                cacheStore: try SQLiteCacheStore(path: directory.appendingPathComponent("cache.sqlite").path)))
        let user = try await client.signInAsGuest()
        print("signed in as a guest (installation secret kept in the secure store)")
        try await grant(10, to: user.userId, adminURL: adminURL, adminKey: adminKey)
        print("admin granted 10 tokens")

        let start = ContinuousClock.now
        let timeline = Task {
            var last: String?
            for await state in client.observe(client.walletQuery) {
                guard let wallet = state.value else { continue }
                let kind = state.pendingMutations > 0 ? "optimistic" : (state.isFetching ? "fetching" : "confirmed")
                let line = "\(kind) balance \(wallet.balance)" + (state.pendingMutations > 0 ? " (\(state.pendingMutations) pending)" : "")
                if line != last { print(String(format: "  %7.1f ms  ", elapsed(since: start)) + line) }
                last = line
            }
        }
        print("balance timeline:")
        _ = try await client.fetch(client.walletQuery, forceRefresh: true)
        _ = try await client.fetch(.actions())
        _ = try await client.fetch(client.quotasQuery)
        async let first = client.perform("ai.query", intent: "question-1")
        async let second = client.perform("ai.query", intent: "question-2")
        _ = try await (first, second)
        try await client.perform("ai.query", intent: "question-3")
        do {
            try await client.perform("ai.query", intent: "question-4")
        } catch let error as ClientError {
            print(String(format: "  %7.1f ms  ", elapsed(since: start)) + "rolled back: \(error) → paywall")
        }
        for index in 1...4 {
            do {
                let result = try await client.perform("reading", intent: "reading-\(index)")
                print("reading \(index): paid with \(result.paidWith.rawValue)")
            } catch let error as ClientError {
                print("reading \(index): \(error)")
            }
        }
        timeline.cancel()
        print("\nSDK metrics:\n\(client.metrics.summary())")
        try await client.signOut()
        print("signed out: cache, session and installation secret removed")
    }

    private func elapsed(since start: ContinuousClock.Instant) -> Double {
        let duration = ContinuousClock.now - start
        return Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }

    private func grant(_ amount: Int64, to userId: String, adminURL: URL, adminKey: String) async throws {
        let response = try await URLSessionTransport(baseURL: adminURL).send(
            TransportRequest(
                method: "POST", path: "/admin/v1/users/\(userId)/grants",
                headers: ["Authorization": "Bearer \(adminKey)", "Content-Type": "application/json", "Idempotency-Key": UUID().uuidString],
                body: try TallyJSON.encoder().encode(GrantRequest(amount: amount, reason: "demo")), timeout: 10))
        guard (200..<300).contains(response.status) else { throw ValidationError("grant failed with \(response.status)") }
    }
}
