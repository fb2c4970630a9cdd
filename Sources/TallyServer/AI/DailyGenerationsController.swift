import AsyncHTTPClient
import Foundation
import Hummingbird
import NIOHTTP1
import Synchronization
import TallyAPI
import TallyStore

/// `GET /v1/ai/daily/{name}`: the user's generation for their local day, computed at most once per user and day.
///
/// The generation is stored as the response of its charge: the action runs under the idempotency key
/// `tally.daily/<name>/<day>` of the user, so it is charged once and stored in the same transaction (it survives
/// a restart and is the same from every device). Concurrent first calls share one computation: in this process
/// through ``SingleFlight``, across processes through a lease in the database (the others read the stored
/// response once it is there). A failed generation charges nothing and stores nothing: the next call tries again.
/// Once made, a generation lasts until the local midnight in effect when it was made (changing time zone does
/// not make a new one early, as with quota windows).
struct DailyGenerationsController {
    let services: TallyServices
    let ai: AIGateway
    let chat: ChatCompletionsController

    /// How long a call waits for another process's generation before answering 503.
    static let waitLimit: TimeInterval = 60
    /// How often it looks.
    static let pollInterval: TimeInterval = 0.05

    @Sendable func generation(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let name = context.parameters.get("name") ?? ""
        guard let spec = ai.configuration.dailyGenerations.first(where: { $0.name == name }) else {
            throw APIError(.notFound, "No daily generation named '\(name.prefix(64))'.")
        }
        let userId = context.identity.userId
        let now = services.clock.now
        var parameters: [String: String] = [:]
        for param in spec.params {
            guard let value = request.uri.queryParameters[Substring(param)].map(String.init), (1...200).contains(value.count),
                !value.unicodeScalars.contains(where: { CharacterSet.controlCharacters.contains($0) })
            else { throw APIError(.invalidQuery, "'\(param)' is required: 1 to 200 characters, no control characters.") }
            parameters[param] = value
        }
        if let cached = ai.generations.get(userId: userId, name: name, now: now) { return Self.response(cached) }
        guard let user = try await chat.storeCall({ try await services.store.user(id: userId) }) else {
            throw APIError(.unauthorized, "A valid access token is required.")
        }
        let timeZone = TimeZone(identifier: user.timezone) ?? .gmt
        let day = Self.dayString(now, in: timeZone)
        let expiresAt = QuotaWindow.firstMidnight(atOrAfter: now.addingTimeInterval(1), in: timeZone)
        let key = IdempotencyKey(
            scope: userId, key: "tally.daily/\(name)/\(day)", fingerprint: Secrets.sha256("GET daily \(name) \(day)"))
        let arguments = parameters
        let bytes = try await ai.daily.run(userId + "\u{0}" + key.key) {
            try await produce(spec, user: user, day: day, expiresAt: expiresAt, key: key, parameters: arguments)
        }
        let stored = (try? JSONResponse.decoder.decode(DailyGeneration.self, from: Data(bytes)))?.expiresAt ?? expiresAt
        ai.generations.put(userId: userId, name: name, bytes: bytes, until: stored)
        return Self.response(bytes)
    }

    /// The stored generation, or a new one made under the lease; waits for another process's when it holds the lease.
    private func produce(
        _ spec: DailyGenerationSpec, user: UserRecord, day: String, expiresAt: Date, key: IdempotencyKey, parameters: [String: String]
    ) async throws -> [UInt8] {
        let store = services.store
        let lease = "daily/" + user.id + "/" + key.key
        let started = services.clock.now
        while true {
            if let stored = try await chat.storeCall({ try await store.storedResponse(for: key) }) { return stored.body }
            let now = services.clock.now
            let until = now.addingTimeInterval(TimeInterval(ai.configuration.upstream.timeout.components.seconds) + 10)
            if try await chat.storeCall({ try await store.takeLease(lease, holder: ai.holder, until: until, now: now) }) {
                do {
                    let bytes = try await generate(spec, user: user, day: day, expiresAt: expiresAt, key: key, parameters: parameters)
                    try? await store.releaseLease(lease, holder: ai.holder)
                    return bytes
                } catch {
                    try? await store.releaseLease(lease, holder: ai.holder)
                    throw error
                }
            }
            guard now.timeIntervalSince(started) < Self.waitLimit else {
                throw APIError(.unavailable, "The generation is still being made; retry shortly.", headers: [.retryAfter: "1"])
            }
            try await services.clock.sleep(for: Self.pollInterval)
        }
    }

    /// Checks the charge would pass, calls the model, and charges under `key` with the generation as the stored response.
    private func generate(
        _ spec: DailyGenerationSpec, user: UserRecord, day: String, expiresAt: Date, key: IdempotencyKey, parameters: [String: String]
    ) async throws -> [UInt8] {
        let store = services.store
        // Someone finished while this process waited for the lease.
        if let stored = try await chat.storeCall({ try await store.storedResponse(for: key) }) { return stored.body }
        try await checkAffordable(spec, userId: user.id)
        var profile: JSONValue?
        if let document = spec.profileDocument, spec.prompt.readsProfile {
            profile = try await chat.storeCall {
                try await store.document(userId: user.id, collection: document.collection, id: document.id)
            }.flatMap { $0.deleted ? nil : try? JSONValue.parse($0.data) }
        }
        let prompt = spec.prompt.render(day: day, user: user, parameters: parameters, profile: profile)
        let content = try await complete(prompt, model: spec.model)
        let generation = DailyGeneration(
            name: spec.name, day: day, content: content, generatedAt: services.clock.now, expiresAt: expiresAt)
        let body = try JSONResponse.bytes(generation)
        let execution = try await chat.storeCall {
            try await store.execute(
                .performAction(userId: user.id, action: spec.action, quotaLimit: spec.quotaLimit), idempotency: key,
                now: services.clock.now
            ) { _ in StoredResponse(status: 200, body: body) }
        }
        if !execution.isReplay { services.notifier.walletChanged(userId: user.id) }
        return execution.response.body
    }

    /// Refuses (402 with the wallet and quotas) a generation whose action would be refused now, before the model is paid.
    private func checkAffordable(_ spec: DailyGenerationSpec, userId: String) async throws {
        let now = services.clock.now
        guard let state = try await chat.storeCall({ try await services.store.accountState(userId: userId, now: now) }) else {
            throw APIError(.unauthorized, "A valid access token is required.")
        }
        let remaining = spec.action.quota.flatMap { quota in services.views.quotas(for: state).first { $0.name == quota }?.remaining }
        switch ActionDecision.decide(
            action: spec.action, isPremium: state.user.isPremium(at: now), quotaRemaining: remaining, available: state.wallet.available)
        {
        case .insufficientTokens: throw APIError(StoreError(.insufficientTokens, state: state), views: services.views)
        case .quotaExhausted: throw APIError(StoreError(.quotaExhausted, state: state), views: services.views)
        case .useQuota, .premium, .charge: return
        }
    }

    /// The model's answer to `prompt` (one user message), through the same upstream as chat calls.
    private func complete(_ prompt: String, model: AIModelSpec) async throws -> String {
        var body: [String: JSONValue] = [
            "model": .string(model.upstreamModel),
            "messages": .array([.object(["role": .string("user"), "content": .string(prompt)])]),
        ]
        body[ai.configuration.upstream.capField.rawValue] = .int(model.maxCompletionTokens)
        let response: HTTPClientResponse
        do {
            response = try await ai.upstream.post(JSONValue.object(body).bytes)
        } catch {
            throw APIError(.upstreamFailed, "The model could not be reached; nothing was charged.")
        }
        let answer = try? await response.body.collect(upTo: 16 << 20)
        guard response.status == .ok else {
            throw ChatCompletionsController.upstreamError(
                status: Int(response.status.code), body: answer.map { Array($0.readableBytesView) } ?? [])
        }
        guard let answer, let value = try? JSONValue.parse(answer.readableBytesView),
            case .array(let choices)? = value["choices"], let text = choices.first?["message"]?["content"]?.stringValue
        else { throw APIError(.upstreamFailed, "The model's answer was not a chat completion; nothing was charged.") }
        return text
    }

    static func response(_ bytes: [UInt8]) -> Response {
        JSONResponse.make(status: .ok, bytes: bytes, headers: [.cacheControl: "private, no-cache"])
    }

    /// `YYYY-MM-DD` of `instant` in `timeZone`.
    static func dayString(_ instant: Date, in timeZone: TimeZone) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let parts = calendar.dateComponents([.year, .month, .day], from: instant)
        return String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
    }
}

/// Generations this process has served, until their expiry: a repeated call answers from memory. A stored
/// generation never changes, so a copy cannot be stale before it expires.
final class GenerationCache: Sendable {
    private struct Entry { var bytes: [UInt8]; var until: Date }
    private let entries = Mutex<[String: Entry]>([:])
    /// Entries kept before the cache starts over.
    static let capacity = 100_000

    func get(userId: String, name: String, now: Date) -> [UInt8]? {
        entries.withLock { entries in
            guard let entry = entries[userId + "\u{0}" + name], entry.until > now else { return nil }
            return entry.bytes
        }
    }

    func put(userId: String, name: String, bytes: [UInt8], until: Date) {
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            entries[userId + "\u{0}" + name] = Entry(bytes: bytes, until: until)
        }
    }
}
