import Foundation
import TallyAPI
@testable import TallyClient
import TallyTestKit
import Testing

/// What the SDK reports when something fails: a code an app can match in every way Swift offers, with what the
/// failure carries; the truth about failures that are not the server's (a cancellation, a local error).
@Suite("Client errors", .timeLimit(.minutes(1)))
struct ClientErrorTests {
    /// A transport for tests without a server: every request is answered by `answer`.
    private final class StubTransport: HTTPTransport {
        let answer: @Sendable (TransportRequest) async throws -> TransportResponse
        init(_ answer: @escaping @Sendable (TransportRequest) async throws -> TransportResponse) { self.answer = answer }
        func send(_ request: TransportRequest) async throws -> TransportResponse { try await answer(request) }
    }

    /// An app's own transport failing in its own way.
    private struct Unplugged: Error {}

    private static func client(clock: ManualClock, _ answer: @escaping @Sendable (TransportRequest) async throws -> TransportResponse) -> Client {
        var configuration = ClientConfiguration(baseURL: URL(string: "http://127.0.0.1:9")!, secureStore: MemorySecureStore())
        configuration.transport = StubTransport(answer)
        configuration.clock = clock
        configuration.retry = .none
        configuration.metrics = ClientMetrics(exportLabel: nil)
        configuration.timeZone = nil
        return Client(configuration: configuration)
    }

    private static let prices = Query<ActionList>.actions()

    @Test("Every refusal keeps what it carries, under a code that ==, switch and catch patterns match")
    func codesAndWhatTheyCarry() throws {
        let wallet = Wallet(balance: 2, held: 0, version: 3)
        let quotas = [Quota(name: "reading", limit: 3, used: 3, resetsAt: Date(timeIntervalSince1970: 1_800_000_000), unlimited: false)]
        func answer(_ status: Int, _ code: ErrorCode?, _ message: String = "m", retryAfter: TimeInterval? = nil) -> ClientError {
            let detail = code.map { ErrorResponse(error: ErrorDetail(code: $0, message: message), wallet: wallet, quotas: quotas) }
            return RequestExecutor.error(status: status, detail: detail, retryAfter: retryAfter)
        }

        let refusal = answer(402, .insufficientTokens)
        #expect(refusal.code == .insufficientTokens && refusal.wallet == wallet && refusal.quotas == quotas)
        #expect(refusal.description == "insufficient tokens (available 2)")
        let exhausted = answer(402, .quotaExhausted)
        #expect(exhausted.code == .quotaExhausted && exhausted.wallet == wallet && exhausted.quotas == quotas)
        #expect(answer(401, .invalidCredentials).code == .invalidCredentials)
        #expect(answer(401, .unauthorized).code == .unauthorized)
        let limited = answer(429, .rateLimited, retryAfter: 7)
        #expect(limited.code == .rateLimited && limited.retryAfter == 7)
        #expect(limited.description == "rate limited, retry after 7 s")
        let failed = answer(500, .internalError, "boom")
        #expect(failed.code == .server && failed.status == 500 && failed.serverCode == .internalError && failed.message == "boom")
        #expect(failed.description == "server error 500 internal: boom")
        let bare = answer(503, nil)
        #expect(bare.code == .server && bare.status == 503 && bare.serverCode == ErrorCode(rawValue: "http_503"))
        #expect(bare.description == "server error 503 http_503: HTTP 503")

        // Matched as an app would: a catch pattern, a where clause, a switch over the code.
        func fail(with error: ClientError) throws { throw error }
        var caught: [String] = []
        for error in [refusal, exhausted, failed] {
            do {
                try fail(with: error)
            } catch ClientError.Code.unauthorized {
                caught.append("unauthorized")
            } catch ClientError.Code.insufficientTokens, ClientError.Code.quotaExhausted {
                caught.append("paywall")
            } catch let error as ClientError where error.code == .server {
                caught.append("server \(error.status ?? 0)")
            }
        }
        #expect(caught == ["paywall", "paywall", "server 500"])
        switch exhausted.code {
        case .insufficientTokens: Issue.record("matched the wrong code")
        case .quotaExhausted: break
        default: Issue.record("matched no code")
        }
        #expect(ClientError.Code.offline ~= ClientError(.offline) as any Error)
        #expect(!(ClientError.Code.offline ~= CancellationError() as any Error))
    }

    @Test("Errors are equal when their code and data are; a query state's error stays two words (the cache-hit path copies it)")
    func equalityAndSize() {
        let wallet = Wallet(balance: 2, held: 0, version: 3)
        #expect(ClientError(.offline) == ClientError(.offline))
        #expect(ClientError(.offline) != ClientError(.timedOut))
        #expect(ClientError(.insufficientTokens, wallet: wallet) == ClientError(.insufficientTokens, wallet: wallet))
        #expect(ClientError(.insufficientTokens, wallet: wallet) != ClientError(.insufficientTokens))
        #expect(ClientError(.rateLimited, retryAfter: 1) != ClientError(.rateLimited, retryAfter: 2))
        #expect(MemoryLayout<ClientError?>.size <= 2 * MemoryLayout<Int>.size)
    }

    @Test("A cancelled fetch throws CancellationError and leaves no error in the query's state")
    func cancelledFetch() async throws {
        let clock = ManualClock()
        let client = Self.client(clock: clock) { _ in
            try await clock.sleep(for: 60)
            throw TransportError.offline
        }
        let fetch = Task { try await client.fetch(Self.prices) }
        try await clock.waitForSleepers(1)
        fetch.cancel()
        await #expect(throws: CancellationError.self) { try await fetch.value }
        #expect(await eventually { !client.state(Self.prices).isFetching })
        #expect(client.state(Self.prices).error == nil)  // before the fix: offline
    }

    @Test("A cancelled request that the transport reports as a lost connection throws CancellationError, not offline")
    func cancellationReportedAsALostConnection() async throws {
        let clock = ManualClock()
        let client = Self.client(clock: clock) { _ in
            do { try await clock.sleep(for: 60) } catch { throw TransportError.connectionLost }
            throw TransportError.offline
        }
        // A sign-in is a POST without an Idempotency-Key: a lost connection is not retried.
        let signIn = Task { try await client.signIn(email: "someone@example.com", password: "correct horse battery") }
        try await clock.waitForSleepers(1)
        signIn.cancel()
        await #expect(throws: CancellationError.self) { try await signIn.value }  // before the fix: ClientError offline
    }

    @Test("A failure that is not the network's is reported as what it is: an undecodable answer, a local error")
    func failuresAreReportedTruthfully() async throws {
        let garbled = Self.client(clock: ManualClock()) { _ in TransportResponse(status: 200, body: Data("not json".utf8)) }
        let undecodable = await #expect(throws: ClientError.self) { try await garbled.fetch(Self.prices) }
        #expect(undecodable?.code == .invalidResponse)
        #expect(garbled.state(Self.prices).error?.code == .invalidResponse)

        let unplugged = Self.client(clock: ManualClock()) { _ in throw Unplugged() }
        await #expect(throws: Unplugged.self) { try await unplugged.fetch(Self.prices) }
        let shown = try #require(unplugged.state(Self.prices).error)
        #expect(shown.code == .unexpected)  // before the fix: offline
        #expect(shown.message?.contains("Unplugged") == true)
    }
}
