import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization
import TallyAPI

/// A mail hook on loopback for the server's and the SDK's tests: a real HTTP server (Hummingbird on 127.0.0.1, a free
/// port) that checks each request's `X-Tally-Signature` against its secret — with its own HMAC, not the server's code —
/// and records the mails it accepts. A request whose signature does not verify is answered 401 and counted in
/// ``refused``, never recorded. ``failNext(_:)`` makes it answer 503 to the next requests, to test retries.
public final class MailStandIn: Sendable {
    /// One mail as the server posted it.
    public struct Message: Sendable, Hashable, Decodable {
        /// The recipient.
        public var to: String
        /// `password_reset` or `email_verification`.
        public var template: String
        /// The code.
        public var code: String
        /// When the code stops working.
        public var expiresAt: Date
        /// The signature's `t` (unix seconds): the server's clock when it signed.
        public var signedAt: Int64 = 0

        private enum CodingKeys: String, CodingKey { case to, template, code, expiresAt }
    }

    fileprivate struct State {
        var messages: [Message] = []
        var refused = 0
        var requests = 0
        var failing = 0
        var waiters: [(id: UInt64, count: Int, continuation: CheckedContinuation<Void, any Error>)] = []
        var nextWaiter: UInt64 = 0
    }

    /// The key the server signs with (give it as `MailConfiguration(webhookURL: url, secret: secret)`).
    public let secret: String
    /// The port it listens on.
    public let port: Int
    private let recorder: Recorder

    private init(secret: String, port: Int, recorder: Recorder) {
        self.secret = secret
        self.port = port
        self.recorder = recorder
    }

    /// What the hook's route records.
    private final class Recorder: Sendable {
        let state = Mutex(State())
    }

    /// The hook's URL.
    public var url: String { "http://127.0.0.1:\(port)/hook" }
    /// Every mail accepted so far, in arrival order.
    public var messages: [Message] { recorder.state.withLock { $0.messages } }
    /// Requests refused for a bad or missing signature.
    public var refused: Int { recorder.state.withLock { $0.refused } }
    /// Every request received (accepted, refused, or failed on purpose).
    public var requests: Int { recorder.state.withLock { $0.requests } }

    /// The mails accepted for `email`.
    public func messages(to email: String) -> [Message] { messages.filter { $0.to == email } }

    /// Answers 503 to the next `count` requests (after checking their signatures).
    public func failNext(_ count: Int) { recorder.state.withLock { $0.failing = count } }

    /// Waits until `count` mails have been accepted in all; returns them all. Throws `CancellationError` when the
    /// waiting task is cancelled (a test's time limit).
    @discardableResult
    public func waitForMessages(_ count: Int) async throws -> [Message] {
        let id = recorder.state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let ready = recorder.state.withLock { state -> Bool in
                    if state.messages.count >= count { return true }
                    if Task.isCancelled { return true }
                    state.waiters.append((id, count, continuation))
                    return false
                }
                if ready {
                    if Task.isCancelled { continuation.resume(throwing: CancellationError()) } else { continuation.resume() }
                }
            }
        } onCancel: {
            let waiter = recorder.state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            waiter?.resume(throwing: CancellationError())
        }
        return messages
    }

    /// The next mail to `email` after the `already` ones it had: waits for it.
    public func nextMessage(to email: String, after already: Int = 0) async throws -> Message {
        while true {
            let mine = messages(to: email)
            if mine.count > already { return mine[already] }
            try await waitForMessages(messages.count + 1)
        }
    }

    /// Whether `header` (`t=<unix>,v1=<hex>`) signs `body` under `secret`: HMAC-SHA-256 of `"<t>.<body>"`. Returns `t`.
    public static func verify(signature header: String, body: [UInt8], secret: String) -> Int64? {
        var fields: [Substring: Substring] = [:]
        for part in header.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1)
            if pair.count == 2 { fields[pair[0]] = pair[1] }
        }
        guard let t = fields["t"], let timestamp = Int64(t), let given = fields["v1"] else { return nil }
        var signed = Array("\(timestamp).".utf8)
        signed += body
        let mac = HMAC<SHA256>.authenticationCode(for: signed, using: SymmetricKey(data: Array(secret.utf8)))
        let expected = mac.map { String(format: "%02x", $0) }.joined()
        return expected == String(given) ? timestamp : nil
    }

    /// Runs a stand-in with `secret` for the duration of `body`.
    public static func with<T: Sendable>(
        secret: String = "mail-stand-in-secret-" + UUID().uuidString, _ body: @Sendable (MailStandIn) async throws -> T
    ) async throws -> T {
        let recorder = Recorder()
        let router = Router()
        router.post("hook") { request, context -> Response in
            let bytes = Array(try await request.body.collect(upTo: 64 * 1024).readableBytesView)
            let signature = request.headers[HTTPField.Name("X-Tally-Signature")!] ?? ""
            guard let signedAt = verify(signature: signature, body: bytes, secret: secret),
                var message = try? TallyJSON.decoder().decode(Message.self, from: Data(bytes))
            else {
                recorder.state.withLock {
                    $0.requests += 1
                    $0.refused += 1
                }
                return Response(status: .unauthorized)
            }
            message.signedAt = signedAt
            let (failing, woken) = recorder.state.withLock { state -> (Bool, [CheckedContinuation<Void, any Error>]) in
                state.requests += 1
                if state.failing > 0 {
                    state.failing -= 1
                    return (true, [])
                }
                state.messages.append(message)
                let count = state.messages.count
                let due = state.waiters.filter { $0.count <= count }
                state.waiters.removeAll { $0.count <= count }
                return (false, due.map(\.continuation))
            }
            for continuation in woken { continuation.resume() }
            return Response(status: failing ? .serviceUnavailable : .noContent)
        }
        var logger = Logger(label: "mail-stand-in")
        logger.logLevel = .warning
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) }, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            let services = ServiceGroup(configuration: .init(services: [app], logger: logger))
            group.addTask { try await services.run() }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CancellationError() }
            let standIn = MailStandIn(secret: secret, port: port, recorder: recorder)
            do {
                let value = try await body(standIn)
                await services.triggerGracefulShutdown()
                return value
            } catch {
                await services.triggerGracefulShutdown()
                throw error
            }
        }
    }
}
