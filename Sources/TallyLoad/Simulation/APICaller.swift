import Foundation
import NIOCore
import NIOHTTP1
import TallyAPI

/// Sends one logical request over a user's connection until it has a definitive answer: transport
/// failures, `409 idempotency_key_in_use` and `503 unavailable` are retried with the same request (same
/// Idempotency-Key) with capped exponential backoff (and at least a 503's `Retry-After`), until the
/// deadline — as an app's SDK does.
struct APICaller {
    let connection: LoadConnection
    let recorder: LatencyRecorder
    let timeout: Duration
    let deadline: Duration

    static let encoder = TallyJSON.encoder()
    static let decoder = TallyJSON.decoder()

    /// The final response, or nil when none came before the deadline.
    func send(_ request: LoadRequest, operation: String) async -> LoadResponse? {
        let clock = ContinuousClock()
        let start = clock.now
        var attempt = 0
        while true {
            var retryAfter = Duration.zero
            do {
                let response = try await connection.send(request, timeout: .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000))
                switch response.status {
                case 409 where Self.inProgress(response): break
                case 503:
                    recorder.recordRetry(operation)
                    retryAfter = .seconds(response.headers.first(name: "Retry-After").flatMap(Int.init) ?? 1)
                default: return response
                }
            } catch {
                recorder.recordRetry(operation)
            }
            attempt += 1
            let backoff = max(retryAfter, Duration.milliseconds(min(2_000, 25 << min(attempt, 7))))
            if clock.now - start + backoff > deadline { return nil }
            try? await Task.sleep(for: backoff)
        }
    }

    static func inProgress(_ response: LoadResponse) -> Bool {
        (try? decoder.decode(ErrorResponse.self, from: Data(response.body)))?.error.code == .idempotencyKeyInUse
    }

    static func json(_ value: some Encodable) -> [UInt8] { Array((try? encoder.encode(value)) ?? Data()) }

    static func decode<T: Decodable>(_ type: T.Type, _ response: LoadResponse) -> T? {
        try? decoder.decode(type, from: Data(response.body))
    }
}
