import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Synchronization
import TallyAPI
import TallyStore

/// One account mail as the hook receives it: `{"code","expiresAt","template","to"}`.
struct MailMessage: Encodable, Sendable {
    /// The account's email address.
    var to: String
    /// Which mail: `password_reset` or `email_verification` (``AccountCodePurpose``'s raw values).
    var template: String
    /// The code to show the user.
    var code: String
    /// When the code stops working (RFC 3339).
    var expiresAt: Date
}

/// Posts account mails to the configured webhook (``MailConfiguration``), signed, retrying what may succeed later.
///
/// Each attempt is `POST <webhookURL>` with the message as JSON and `X-Tally-Signature: t=<unix seconds>,v1=<hex>`, the
/// HMAC-SHA-256 under the secret of `"<t>.<body>"` (signed afresh each attempt, on the injected clock). A 2xx answer
/// delivers; a connection failure, a timeout, 408, 429 or a 5xx is retried after ``retryDelay(afterAttempt:unit:)``
/// (1 s doubling to 60 s, the upper half random) while the code is still valid, at most ``maxAttempts`` times; any other
/// answer is the hook refusing (a wrong URL or secret): logged, not retried. Log lines name the template, the attempt
/// and the status — never the address, the code or the secret.
struct MailHook: Sendable {
    let configuration: MailConfiguration
    let clock: any TallyClock
    let logger: Logger
    /// What deliveries are doing, for tests and logs.
    let progress: MailProgress

    /// Attempts per mail at most.
    static let maxAttempts = 10
    /// The most one attempt may take.
    static let attemptTimeout: TimeAmount = .seconds(10)
    /// The signature header.
    static let signatureHeader = "X-Tally-Signature"

    /// The wait before attempt `attempt + 1`: 1 s doubling up to 60 s, of which the upper half is random (`unit` in [0, 1)).
    static func retryDelay(afterAttempt attempt: Int, unit: Double) -> TimeInterval {
        backoffDelay(attempt: attempt, first: 1, maximum: 60, unit: unit)
    }

    /// `t=<t>,v1=<hex HMAC-SHA-256 of "<t>.<body>" under secret>`.
    static func signature(body: [UInt8], timestamp: Int64, secret: String) -> String {
        var signed = Data("\(timestamp).".utf8)
        signed.append(contentsOf: body)
        let mac = HMAC<SHA256>.authenticationCode(for: signed, using: SymmetricKey(data: Data(secret.utf8)))
        return "t=\(timestamp),v1=\(Secrets.hex(mac))"
    }

    /// Delivers `message`, retrying as the type's documentation says; returns when it is delivered, refused, given
    /// up on, or the task is cancelled (the server stopping).
    func deliver(_ message: MailMessage, client: HTTPClient) async {
        let body: [UInt8]
        do {
            body = Array(try TallyJSON.encoder().encode(message))
        } catch {
            logger.error("mail hook: a mail could not be encoded", metadata: ["tally.template": .string(message.template)])
            return
        }
        var attempt = 0
        while !Task.isCancelled {
            attempt += 1
            let status: UInt?
            var failure = "-"
            do {
                status = try await post(body, client: client)
            } catch {
                if Task.isCancelled { return }
                status = nil
                failure = "\(type(of: error))"
            }
            let metadata: Logger.Metadata = [
                "tally.template": .string(message.template), "tally.attempt": "\(attempt)",
                "tally.status": .string(status.map { "\($0)" } ?? failure),
            ]
            if let status, (200..<300).contains(status) {
                progress.delivered()
                logger.debug("mail hook: delivered", metadata: metadata)
                return
            }
            if let status, !Self.isTransient(status) {
                progress.failed()
                logger.warning("mail hook: refused a mail (check mail.webhookURL and the secret)", metadata: metadata)
                return
            }
            let delay = Self.retryDelay(afterAttempt: attempt, unit: Double.random(in: 0..<1))
            guard attempt < Self.maxAttempts, clock.now.addingTimeInterval(delay) < message.expiresAt else {
                progress.failed()
                logger.warning("mail hook: gave up on a mail", metadata: metadata)
                return
            }
            logger.notice("mail hook: attempt failed, retrying", metadata: metadata.merging(["tally.retry_in": "\(delay)"]) { $1 })
            progress.retryWaiting(+1)
            defer { progress.retryWaiting(-1) }
            do { try await clock.sleep(for: delay) } catch { return }
        }
    }

    /// One signed POST; the answer's status.
    private func post(_ body: [UInt8], client: HTTPClient) async throws -> UInt {
        var request = HTTPClientRequest(url: configuration.webhookURL)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "tally-mail-hook/1")
        request.headers.add(
            name: Self.signatureHeader,
            value: Self.signature(body: body, timestamp: Int64(saturating: clock.now.timeIntervalSince1970, rounding: .down), secret: configuration.secret))
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await client.execute(request, timeout: Self.attemptTimeout)
        // The answer's body is read and dropped: it may hold anything, and the connection goes back to the pool.
        _ = try? await response.body.collect(upTo: 64 * 1024)
        return response.status.code
    }

    /// Worth another attempt: 408, 429, 5xx.
    static func isTransient(_ status: UInt) -> Bool { status == 408 || status == 429 || status >= 500 }
}

/// Counts of what the mail service did, for its log lines and for tests (which wait for a retry to be pending
/// before they move the clock, instead of sleeping).
final class MailProgress: Sendable {
    private struct Counts {
        var requests = 0
        var delivered = 0
        var failed = 0
        var waitingRetries = 0
    }

    private let counts = Mutex(Counts())

    /// Requests (``AccountMail/Request``) worked off the queue, whether or not they made a mail.
    var requests: Int { counts.withLock { $0.requests } }
    /// Mails the hook accepted.
    var deliveredCount: Int { counts.withLock { $0.delivered } }
    /// Mails refused or given up on.
    var failedCount: Int { counts.withLock { $0.failed } }
    /// Deliveries waiting to try again.
    var waitingRetries: Int { counts.withLock { $0.waitingRetries } }

    func requestDone() { counts.withLock { $0.requests += 1 } }
    func delivered() { counts.withLock { $0.delivered += 1 } }
    func failed() { counts.withLock { $0.failed += 1 } }
    func retryWaiting(_ change: Int) { counts.withLock { $0.waitingRetries += change } }
}
