import AsyncHTTPClient
import Foundation
import Hummingbird
import NIOHTTP1
import Synchronization
import TallyAPI
import TallyStore

/// `GET /v1/ai/daily/{name}`: the user's generation for their day, computed at most once per user, parameters and
/// day.
///
/// The generation is stored as the response of its charge: the action runs under an idempotency key of the user that
/// names the generation's series (its name and parameters, ``DailySeries``) and its window's end, so it is charged
/// once and stored in the same transaction (it survives a restart and is the same from every device and process).
/// A generation's window follows the quota windows' rule (``QuotaWindow``), decided from the series' latest stored
/// generation, so every process decides alike: an open window keeps its end whatever the user's time zone became,
/// and a new one starts no earlier than the last one ended and lasts at least 23 hours. Concurrent first calls
/// share one computation: in this process through ``SingleFlight``, across processes through a lease on the series
/// in the database (the others read the stored response once it is there). A failed generation charges nothing
/// and stores nothing: the next call tries again.
struct DailyGenerationsController {
    /// The gateway's configuration, upstream, caches and lease holder name.
    let ai: AIGateway
    let store: any TallyStorage
    let clock: any TallyClock
    /// Told when a generation's charge changed the wallet.
    let notifier: any ChangeNotifier
    /// The quotas as the API shows them (what a generation's quota has left).
    let views: QuotaViews
    /// Withholds free generations from unattested calls where App Attest is enforced.
    let integrity: DeviceIntegrity

    /// How long a call waits for another process's generation before answering 503.
    static let waitLimit: TimeInterval = 60
    /// How often it looks.
    static let pollInterval: TimeInterval = 0.05

    @Sendable func generation(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let name = context.parameters.get("name") ?? ""
        guard var spec = ai.configuration.dailyGenerations.first(where: { $0.name == name }) else {
            throw APIError(.notFound, "No daily generation named '\(name.prefix(64))'.")
        }
        let userId = context.identity.userId
        let now = clock.now
        var parameters: [String: String] = [:]
        for param in spec.params {
            guard let value = request.uri.queryParameters[Substring(param)].map(String.init), (1...200).contains(value.count),
                !value.unicodeScalars.contains(where: { CharacterSet.controlCharacters.contains($0) })
            else { throw APIError(.invalidQuery, "'\(param)' is required: 1 to 200 characters, no control characters.") }
            parameters[param] = value
        }
        let series = DailySeries(name: name, parameters: parameters)
        if let cached = ai.generations.get(userId: userId, series: series.prefix, now: now) { return Self.response(cached) }
        guard let user = try await store.user(id: userId) else {
            throw APIError(.unauthorized, "A valid access token is required.")
        }
        // A free generation needs an assertion where App Attest is enforced: without one, the day's is paid or refused.
        var freeWithheld = false
        if spec.quotaLimit != nil {
            freeWithheld = try await !integrity.allowsFreeValue(
                request, userId: userId, body: nil, logger: context.logger)
        }
        if freeWithheld { spec.quotaLimit = nil }
        let generation: Stored
        do {
            generation = try await ai.daily.run(userId + "\u{0}" + series.prefix) { [spec] in
                try await produce(spec, user: user, series: series)
            }
        } catch where freeWithheld {
            throw await Self.attestationRequired(
                error, quota: spec.action.quota, userId: userId, store: store, clock: clock, views: views)
        }
        ai.generations.put(userId: userId, series: series.prefix, bytes: generation.bytes, until: generation.expiresAt)
        return Self.response(generation.bytes)
    }

    /// `403 attestation_required` in place of a refusal for want of tokens, when the quota had free uses the request
    /// could not take unattested.
    static func attestationRequired(
        _ error: any Error, quota: String?, userId: String, store: any TallyStorage, clock: any TallyClock, views: QuotaViews
    ) async -> any Error {
        guard let error = error as? StoreError, error.code == .insufficientTokens || error.code == .quotaExhausted, let quota,
            let state = try? await store.accountState(userId: userId, now: clock.now),
            (views.quotas(for: state).first { $0.name == quota }?.remaining ?? 0) > 0
        else { return error }
        return APIError(.attestationRequired, "Free uses need an attested device (an X-Tally-Assertion header); this one can still pay.")
    }

    /// A stored generation: its bytes, and the end of its window.
    struct Stored: Sendable {
        var bytes: [UInt8]
        var expiresAt: Date
    }

    /// The series' generation whose window is open, or a new one made under the lease; waits for another process's
    /// while it holds the lease.
    private func produce(_ spec: DailyGenerationSpec, user: UserRecord, series: DailySeries) async throws -> Stored {
        let lease = "daily/" + user.id + "/" + series.prefix
        let started = clock.now
        while true {
            let now = clock.now
            let latest = try await latest(series, user: user, now: now)
            if let latest, latest.expiresAt > now { return latest }
            let until = now.addingTimeInterval(TimeInterval(ai.configuration.upstream.timeout.components.seconds) + 10)
            if try await store.takeLease(lease, holder: ai.holder, until: until, now: now) {
                do {
                    let made = try await generate(spec, user: user, series: series)
                    try? await store.releaseLease(lease, holder: ai.holder)
                    return made
                } catch {
                    try? await store.releaseLease(lease, holder: ai.holder)
                    throw error
                }
            }
            guard now.timeIntervalSince(started) < Self.waitLimit else {
                throw APIError(.unavailable, "The generation is still being made; retry shortly.", headers: [.retryAfter: "1"])
            }
            try await clock.sleep(for: Self.pollInterval)
        }
    }

    /// The series' latest stored generation (its window open or not), as the database holds it.
    private func latest(_ series: DailySeries, user: UserRecord, now: Date) async throws -> Stored? {
        let stored = try await store.storedResponses(scope: user.id, keyPrefix: series.prefix, limit: 4)
        var generations = stored.compactMap { Self.decode($0.body) }
        // A generation stored before parameters and windows were part of its key (under `tally.daily/<name>/<day>`):
        // still the day's for a series without parameters until it expires, so a deployment charges no one twice.
        if series.parameters.isEmpty {
            let day = Self.dayString(now, in: TimeZone(identifier: user.timezone) ?? .gmt)
            let legacy = IdempotencyKey(
                scope: user.id, key: "tally.daily/\(series.name)/\(day)", fingerprint: Secrets.sha256("GET daily \(series.name) \(day)"))
            if let old = try await store.storedResponse(for: legacy), let generation = Self.decode(old.body) {
                generations.append(generation)
            }
        }
        return generations.max { $0.expiresAt < $1.expiresAt }
    }

    /// A stored body as a generation, if it is one.
    private static func decode(_ bytes: [UInt8]) -> Stored? {
        (try? JSONResponse.decoder.decode(DailyGeneration.self, from: Data(bytes))).map { Stored(bytes: bytes, expiresAt: $0.expiresAt) }
    }

    /// Makes the series' generation for the window that follows its latest (read again under the lease: another
    /// process may have made it meanwhile), charged under the window's key with the generation as the stored response.
    private func generate(_ spec: DailyGenerationSpec, user: UserRecord, series: DailySeries) async throws -> Stored {
        let now = clock.now
        let latest = try await latest(series, user: user, now: now)
        if let latest, latest.expiresAt > now { return latest }
        let timeZone = TimeZone(identifier: user.timezone) ?? .gmt
        let window = QuotaWindow.current(latest.map { QuotaCounter(used: 1, windowEnd: $0.expiresAt) }, now: now, timeZone: timeZone)
        let key = series.key(windowEnd: window.windowEnd, scope: user.id)
        // The day a window belongs to is the local day it ends with: the one it covers whole (a window that starts
        // late in a day, after a time-zone change, also covers the rest of that one).
        let day = Self.dayString(window.windowEnd.addingTimeInterval(-1), in: timeZone)
        let bytes = try await make(spec, user: user, day: day, expiresAt: window.windowEnd, key: key, parameters: series.parameters)
        return Stored(bytes: bytes, expiresAt: Self.decode(bytes)?.expiresAt ?? window.windowEnd)
    }

    /// Checks the charge would pass, calls the model, and charges under `key` with the generation as the stored response.
    private func make(
        _ spec: DailyGenerationSpec, user: UserRecord, day: String, expiresAt: Date, key: IdempotencyKey, parameters: [String: String]
    ) async throws -> [UInt8] {
        try await checkAffordable(spec, userId: user.id)
        var profile: JSONValue?
        if let document = spec.profileDocument, spec.prompt.readsProfile {
            profile = try await store.document(userId: user.id, collection: document.collection, id: document.id)
                .flatMap { $0.deleted ? nil : try? JSONValue.parse($0.data) }
        }
        let prompt = spec.prompt.render(day: day, user: user, parameters: parameters, profile: profile)
        let content = try await complete(prompt, model: spec.model, userId: user.id)
        let generation = DailyGeneration(
            name: spec.name, day: day, content: content, generatedAt: clock.now, expiresAt: expiresAt)
        let body = try JSONResponse.bytes(generation)
        let execution = try await store.execute(
            .performAction(userId: user.id, action: spec.action, quotaLimit: spec.quotaLimit), idempotency: key,
            now: clock.now
        ) { _ in StoredResponse(status: 200, body: body) }
        if !execution.isReplay { notifier.walletChanged(userId: user.id) }
        return execution.response.body
    }

    /// Refuses (402 with the wallet and quotas) a generation whose action would be refused now, before the model is paid.
    private func checkAffordable(_ spec: DailyGenerationSpec, userId: String) async throws {
        let now = clock.now
        guard let state = try await store.accountState(userId: userId, now: now) else {
            throw APIError(.unauthorized, "A valid access token is required.")
        }
        // A spec without a quota limit takes no free use (none configured, or withheld from an unattested call).
        let remaining = spec.quotaLimit == nil
            ? nil : spec.action.quota.flatMap { quota in views.quotas(for: state).first { $0.name == quota }?.remaining }
        switch ActionDecision.decide(
            action: spec.action, isPremium: state.user.isPremium(at: now), quotaRemaining: remaining, available: state.wallet.available)
        {
        case .insufficientTokens: throw StoreError(.insufficientTokens, state: state)
        case .quotaExhausted: throw StoreError(.quotaExhausted, state: state)
        case .useQuota, .premium, .charge: return
        }
    }

    /// The model's answer to `prompt` (one user message), through the same upstream as chat calls; `user` is the
    /// Tally user's id, as for chat calls (the provider's abuse signals see one opaque id per user).
    private func complete(_ prompt: String, model: AIModelSpec, userId: String) async throws -> String {
        var body: [JSONKey: JSONValue] = [
            "model": .string(model.upstreamModel),
            "messages": .array([.object(["role": .string("user"), "content": .string(prompt)])]),
            "user": .string(userId),
        ]
        body[ai.configuration.upstream.capField.rawValue] = .int(model.maxCompletionTokens)
        let response: HTTPClientResponse
        do {
            response = try await ai.upstream.post(UpstreamBody(parts: [ByteBuffer(bytes: JSONValue.object(body).bytes)]))
        } catch {
            throw APIError(.upstreamFailed, "The model could not be reached; nothing was charged.")
        }
        let answer = try? await response.body.collect(upTo: 16 << 20)
        guard response.status == .ok else {
            throw ChatCompletionsController.upstreamError(
                status: Int(response.status.code), body: answer.map { Array($0.readableBytesView) } ?? [], redaction: ai.redaction)
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

/// A daily generation's series: its name and the parameters the request gave, which name its stored generations
/// (`tally.daily <name>/<window end>`, with a hash of the parameters after the name when it has some). The space
/// keeps these keys apart from every client's (`Idempotency-Key` is printable ASCII without spaces).
struct DailySeries: Sendable, Hashable {
    /// The generation's name.
    let name: String
    /// The request's parameters.
    let parameters: [String: String]

    /// What every key of the series begins with.
    var prefix: String {
        guard !parameters.isEmpty else { return "tally.daily \(name)/" }
        let canonical = JSONValue.object(Dictionary(uniqueKeysWithValues: parameters.map { (JSONKey($0.key), JSONValue.string($0.value)) })).bytes
        return "tally.daily \(name)?\(Secrets.sha256(String(decoding: canonical, as: UTF8.self)))/"
    }

    /// The key of the generation whose window ends at `windowEnd`.
    func key(windowEnd: Date, scope: String) -> IdempotencyKey {
        let key = prefix + String(windowEnd.millis)
        return IdempotencyKey(scope: scope, key: key, fingerprint: Secrets.sha256("GET daily " + key))
    }
}

/// Generations this process has served, by user and series, until their expiry: a repeated call answers from memory.
/// A stored generation never changes and its window keeps its end, so a copy cannot be stale before it expires.
final class GenerationCache: Sendable {
    private struct Entry { var bytes: [UInt8]; var until: Date }
    private let entries = Mutex<[String: Entry]>([:])
    /// Entries kept before the cache starts over.
    static let capacity = 100_000

    func get(userId: String, series: String, now: Date) -> [UInt8]? {
        entries.withLock { entries in
            guard let entry = entries[userId + "\u{0}" + series], entry.until > now else { return nil }
            return entry.bytes
        }
    }

    func put(userId: String, series: String, bytes: [UInt8], until: Date) {
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            entries[userId + "\u{0}" + series] = Entry(bytes: bytes, until: until)
        }
    }
}
