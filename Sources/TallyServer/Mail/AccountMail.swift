import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import TallyAPI
import TallyStore

/// The account mails — password reset and email verification codes — worked off the request path.
///
/// A route only hands a ``Request`` to ``submit(_:)``, the same work whether or not the email has an account (so
/// neither the answer nor its timing tells). ``run()`` takes the requests in order: it finds the account (none: nothing
/// more happens), makes an 8-digit code from the system's secure random source, stores its keyed hash as the user's one
/// live code of that purpose (``AccountCodeStore/issueAccountCode(_:now:)``; the code itself is kept nowhere) and hands
/// the mail to the ``MailHook``, at most ``concurrentDeliveries`` at a time. The queue is bounded: when it is full,
/// ``submit(_:)`` refuses and the route answers 503 `mail_unavailable`. Mails still waiting to be retried when the server
/// stops are dropped (the user asks again).
final class AccountMail: Service, Sendable {
    /// What to mail.
    enum Request: Sendable {
        /// A password reset code to the account of this email, if there is one.
        case passwordReset(email: String)
        /// An email verification code to this user's email.
        case emailVerification(userId: String)
    }

    /// Requests waiting at most.
    static let capacity = 1_000
    /// Deliveries in flight (each retrying on its own) at most.
    static let concurrentDeliveries = 16

    let hook: MailHook
    let store: any AccountCodeStore & IdentityStore
    let clock: any TallyClock
    let secrets: RuntimeSecrets
    let policy: AccountCodePolicy
    let logger: Logger
    /// What the service did (``MailProgress``).
    var progress: MailProgress { hook.progress }
    private let requests: AsyncStream<Request>
    private let continuation: AsyncStream<Request>.Continuation

    init(
        configuration: MailConfiguration, store: any AccountCodeStore & IdentityStore, clock: any TallyClock, secrets: RuntimeSecrets,
        policy: AccountCodePolicy = AccountCodePolicy(), logger: Logger
    ) {
        self.hook = MailHook(configuration: configuration, clock: clock, logger: logger, progress: MailProgress())
        self.store = store
        self.clock = clock
        self.secrets = secrets
        self.policy = policy
        self.logger = logger
        (requests, continuation) = AsyncStream.makeStream(of: Request.self, bufferingPolicy: .bufferingOldest(Self.capacity))
    }

    /// Queues `request`; `false` when the queue is full or the service has stopped.
    func submit(_ request: Request) -> Bool {
        if case .enqueued = continuation.yield(request) { return true }
        return false
    }

    /// Works off the queue until graceful shutdown.
    func run() async throws {
        var configuration = HTTPClient.Configuration(timeout: .init(connect: .seconds(10), read: .seconds(10)))
        configuration.redirectConfiguration = .disallow
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        await cancelWhenGracefulShutdown { await self.work(client) }
        continuation.finish()
        try await client.shutdown()
    }

    private func work(_ client: HTTPClient) async {
        await withTaskGroup(of: Void.self) { deliveries in
            var inFlight = 0
            for await request in requests {
                if inFlight >= Self.concurrentDeliveries {
                    await deliveries.next()
                    inFlight -= 1
                }
                let message = await prepare(request)
                progress.requestDone()
                guard let message else { continue }
                inFlight += 1
                deliveries.addTask { await self.hook.deliver(message, client: client) }
            }
            deliveries.cancelAll()
        }
    }

    /// The mail a request makes, its code stored; `nil` when there is no account to mail (or the store failed).
    private func prepare(_ request: Request) async -> MailMessage? {
        do {
            let userId: String
            let purpose: AccountCodePurpose
            switch request {
            case .passwordReset(let email):
                guard let account = try await store.passwordHash(email: email) else { return nil }
                userId = account.userId
                purpose = .passwordReset
            case .emailVerification(let id):
                userId = id
                purpose = .emailVerification
            }
            let code = Self.newCode()
            let now = clock.now
            let expiresAt = Date(millis: now.addingTimeInterval(policy.lifetime).millis)
            let stored = NewAccountCode(
                userId: userId, purpose: purpose, hash: secrets.accountCodeHash(code, userId: userId, purpose: purpose),
                expiresAt: expiresAt)
            guard let email = try await store.issueAccountCode(stored, now: now) else { return nil }
            return MailMessage(to: email, template: purpose.rawValue, code: code, expiresAt: expiresAt)
        } catch {
            logger.warning("mail: a code could not be stored; nothing sent", metadata: ["error": "\(error)"])
            return nil
        }
    }

    /// 8 decimal digits, uniformly random from the system's secure generator.
    static func newCode() -> String {
        var generator = SystemRandomNumberGenerator()
        let value = UInt32.random(in: 0..<100_000_000, using: &generator)
        let digits = String(value)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }
}

extension RuntimeSecrets {
    /// The keyed hash an account code is stored and checked under (the server's `ip-hash` key): bound to its user and
    /// purpose, so a stored hash is worth nothing for another account or another use. The key is kept in the database:
    /// whoever holds a whole dump could test the 10⁸ codes offline — and would still have to beat the 15 minutes
    /// a code lives and its single use.
    func accountCodeHash(_ code: String, userId: String, purpose: AccountCodePurpose) -> String {
        Secrets.hmac("account-code:\(purpose.rawValue):\(userId):\(code)", key: ipHashKey.withLock { $0 })
    }
}
