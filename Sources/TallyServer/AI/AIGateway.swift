import Foundation
import Hummingbird
import Logging
import Synchronization
import TallyAPI
import TallyStore

/// The AI gateway's shared parts: the configuration, the upstream connection, each user's calls in flight, the
/// prompt estimates, the settlements waiting for the database and the daily generations being computed in this
/// process. Its routes: ``addRoutes(to:chat:daily:)``.
struct AIGateway: Sendable {
    let configuration: AIConfiguration
    let upstream: UpstreamClient
    let calls: CallLimiter
    /// Takes the upstream's key out of the provider's messages the gateway forwards.
    let redaction: KeyRedaction
    /// Daily generations being made in this process, by user and series.
    let daily: SingleFlight<DailyGenerationsController.Stored>
    /// Daily generations this process served, until their expiry.
    let generations = GenerationCache()
    /// This process's name as a lease holder.
    let holder = UUID().uuidString
    /// Each model's prompt estimate for calls whose usage never came, learned from the completed ones.
    let prompts = PromptEstimates()
    /// Settlements the database could not take, retried until it answers (a service).
    let settlements: PendingSettlements
    /// The chat route's body limit and the bytes of chat bodies this process holds at once.
    let bodies: RequestBodyBudget
    /// Low-priority threads on which large bodies are parsed and written again (a service).
    let bulk = BulkWork()

    init(configuration: AIConfiguration, settlements: PendingSettlements) {
        self.configuration = configuration
        self.settlements = settlements
        self.upstream = UpstreamClient(upstream: configuration.upstream)
        self.calls = CallLimiter(limit: configuration.maxConcurrentPerUser)
        self.redaction = KeyRedaction(key: configuration.upstream.apiKey)
        self.daily = SingleFlight()
        self.bodies = RequestBodyBudget(maxBodyBytes: configuration.maxRequestBytes, bytesInFlight: configuration.requestBytesInFlight)
    }

    /// `GET ai/models`, `POST ai/chat/completions` (`chat`) and `GET ai/daily/{name}` (`daily`) on the authenticated
    /// `/v1` group.
    func addRoutes(to group: RouterGroup<AuthenticatedContext>, chat: ChatCompletionsController, daily: DailyGenerationsController) {
        let models = AIModelList(items: configuration.models)
        group.get("ai/models") { _, _ in JSONResponse.make(body: models, headers: [.cacheControl: "private, max-age=300"]) }
        group.post("ai/chat/completions", use: chat.complete)
        group.get("ai/daily/:name", use: daily.generation)
    }

    /// How long a call's hold lasts: past the longest call (its timeout, plus an idle read), so that only a
    /// crashed server's hold expires (released whole) instead of being captured.
    var holdTTL: TimeInterval {
        TimeInterval(configuration.upstream.timeout.components.seconds + 2 * UpstreamClient.idleTimeoutSeconds + 60)
    }
}

/// Each user's AI calls in flight in this process, at most `limit` (like the rate limits, per process).
final class CallLimiter: Sendable {
    let limit: Int
    private let counts = Mutex<[String: Int]>([:])

    init(limit: Int) { self.limit = limit }

    /// Takes a slot for `userId`; `false` when the user already has `limit` calls in flight.
    func acquire(_ userId: String) -> Bool {
        counts.withLock { counts in
            let used = counts[userId, default: 0]
            guard used < limit else { return false }
            counts[userId] = used + 1
            return true
        }
    }

    /// Gives the slot back.
    func release(_ userId: String) {
        counts.withLock { counts in
            let left = counts[userId, default: 1] - 1
            counts[userId] = left > 0 ? left : nil
        }
    }
}

/// Work computed once per key in this process: the first caller runs it, the others await its result.
final class SingleFlight<Value: Sendable>: Sendable {
    private let running = Mutex<[String: Task<Value, any Error>]>([:])

    /// The result of `work` for `key`, run by the first concurrent caller; the entry is gone once it ends (a
    /// failure is not kept: the next call tries again).
    func run(_ key: String, _ work: @escaping @Sendable () async throws -> Value) async throws -> Value {
        let task = running.withLock { running in
            if let task = running[key] { return task }
            let task = Task { try await work() }
            running[key] = task
            return task
        }
        defer { running.withLock { running in if running[key] == task { running[key] = nil } } }
        return try await task.value
    }
}
