import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import Synchronization
import TallyAPI
import TallyStore

/// `POST /v1/ai/chat/completions`: OpenAI's Chat Completions behind the user's access token. Each call holds
/// the most it can cost, calls the upstream with the server's key, then captures the real usage (releasing
/// the rest), or releases everything when the upstream fails before answering.
struct ChatCompletionsController {
    /// The gateway's configuration, upstream, limits and settlements.
    let ai: AIGateway
    let store: any TallyStorage
    let clock: any TallyClock
    /// Runs non-streamed calls under their idempotency keys.
    let runner: CommandRunner
    /// Told when a settlement changed the wallet.
    let notifier: any ChangeNotifier
    /// The quotas premium calls may be counted against.
    let catalog: Catalog

    @Sendable func complete(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        let userId = context.identity.userId
        let reservation: RequestBodyBudget.Reservation
        do {
            reservation = try ai.bodies.reserve(for: request)
        } catch {
            return try error.response(from: request, context: context).discardingBody(of: request, upTo: ai.bodies.maxBodyBytes)
        }
        let chat = try await ChatRequest.read(request, reservation: reservation, user: userId, ai: ai)
        guard ai.calls.acquire(userId) else {
            throw APIError(
                .rateLimited, "This user already has \(ai.calls.limit) AI calls in flight; retry when one ends.",
                headers: [.retryAfter: "1"])
        }
        let slot = CallSlot(limiter: ai.calls, userId: userId)
        if chat.stream {
            // Streams are not replayed: an Idempotency-Key is ignored (each stream is its own call).
            return try await StreamRelay.start(chat, slot: slot, controller: self)
        }
        defer { slot.end() }
        // The fingerprint (the whole body, an image's megabytes too, in canonical form) only when a key asks for it.
        return try await runner.withIdempotency(
            request: request, scope: userId,
            requestFingerprint: CommandRunner.fingerprint(request, canonicalBody: String(decoding: chat.canonicalBody, as: UTF8.self))
        ) { key in
            if let key, let stored = try await store.storedResponse(for: key) {
                return try Self.replay(stored)
            }
            let call = try await hold(userId, chat)
            var timing = GatewayTiming(bodyRead: chat.bodyRead, upstreamSent: .now)
            let response = try await callUpstream(call)
            let read: UpstreamAnswer
            do {
                read = try await UpstreamAnswer.read(response.body)
                timing.upstreamDone = .now
            } catch {
                await settle(call, charge: nil, why: "upstream answer unreadable")
                throw APIError(.upstreamFailed, "The model's answer could not be read; nothing was charged.")
            }
            let bytes: [UInt8]
            switch read {
            case .whole(let whole): bytes = whole
            case .tooLarge(let usage, let length):
                // Generated and billed by the provider: charged (its usage; without one, the answer's bytes bound its
                // tokens), not returned.
                return try await tooLarge(call, charge: charge(call, usage: usage, chunks: length), idempotency: key)
            }
            guard let parsed = try? JSONValue.parse(bytes), parsed["choices"] != nil else {
                await settle(call, charge: nil, why: "upstream answer not JSON")
                throw APIError(.upstreamFailed, "The model's answer was not a chat completion; nothing was charged.")
            }
            let content = parsed["choices"].flatMap { choices -> Int? in
                guard case .array(let list) = choices else { return nil }
                return list.reduce(0) { $0 + ($1["message"]?["content"]?.stringValue?.utf8.count ?? 0) }
            } ?? 0
            // Without usage, the answer's UTF-8 bytes bound its tokens (never zero for an answer that came).
            let charge = self.charge(call, usage: Self.usage(parsed["usage"]), chunks: content)
            // Stored as `{"charge":…,"completion":…}` in canonical JSON, so a replay answers byte for byte what this one does.
            let completion = parsed.bytes
            let chargeText = Mutex("")
            let execution = try await capture(call, charge: charge, idempotency: key) { report in
                let canonical = (try? JSONValue.parse(ServerSentEvents.json(report)))?.text ?? "{}"
                chargeText.withLock { $0 = canonical }
                return StoredResponse(
                    status: 200, body: Array("{\"charge\":\(canonical),\"completion\":".utf8) + completion + [UInt8(ascii: "}")])
            }
            // Another process captured under the key first: its stored answer.
            if execution.isReplay { return try Self.replay(execution.response) }
            return Self.answer(completion: completion, charge: chargeText.withLock { $0 }, replayed: false, timing: timing)
        }
    }

    /// A non-streamed answer: the completion, its charge in `Tally-Charge`, and — answered now, not replayed — the
    /// gateway's and the upstream's time in `Server-Timing`.
    static func answer(completion: [UInt8], charge: String, replayed: Bool, timing: GatewayTiming? = nil) -> Response {
        var headers: HTTPFields = [.contentType: "application/json", .tallyCharge: charge]
        if replayed { headers[.idempotentReplayed] = "true" }
        if let timing { headers[.serverTiming] = timing.value(at: .now) }
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: completion)))
    }

    /// The answer stored by a capture: the completion as the upstream sent it, the charge in `Tally-Charge` (or
    /// the error of an answer too large to return, with its charge).
    static func replay(_ stored: StoredResponse) throws -> Response {
        guard let value = try? JSONValue.parse(stored.body), let charge = value["charge"] else { throw APIError(.internalError, "Internal error.") }
        if let error = value["error"] { return tooLargeAnswer(error: error, charge: charge.text, replayed: true) }
        guard let completion = value["completion"] else { throw APIError(.internalError, "Internal error.") }
        return answer(completion: completion.bytes, charge: charge.text, replayed: true)
    }

    /// An answer longer than ``UpstreamAnswer/maxBytes``: `charge` captured (under the key, with the error as the
    /// stored response, so a retry gets the same error and no second call), and 502 `answer_too_large` saying so.
    func tooLarge(_ call: HeldCall, charge: ChatCharge, idempotency: IdempotencyKey?) async throws -> Response {
        let stored = Mutex<(error: JSONValue, charge: String)?>(nil)
        let execution = try await capture(call, charge: charge, idempotency: idempotency) { report in
            let canonical = (try? JSONValue.parse(ServerSentEvents.json(report)))?.text ?? "{}"
            let message = "The model's answer is longer than the gateway returns unstreamed (\(UpstreamAnswer.maxBytes >> 20) MiB); "
                + "what it generated was charged: \(report.charged) tokens (prompt \(report.promptTokens), completion \(report.completionTokens)). "
                + "Stream the call for long answers."
            let error = JSONValue.object(["code": .string(ErrorCode.answerTooLarge.rawValue), "message": .string(message)])
            stored.withLock { $0 = (error, canonical) }
            return StoredResponse(status: 502, body: JSONValue.object(["charge": (try? JSONValue.parse(Array(canonical.utf8))) ?? .null, "error": error]).bytes)
        }
        if execution.isReplay { return try Self.replay(execution.response) }
        guard let (error, charge) = stored.withLock({ $0 }) else { throw APIError(.internalError, "Internal error.") }
        return Self.tooLargeAnswer(error: error, charge: charge, replayed: false)
    }

    /// The 502 of an answer too large to return, its charge in `Tally-Charge`.
    static func tooLargeAnswer(error: JSONValue, charge: String, replayed: Bool) -> Response {
        var headers: HTTPFields = [.contentType: "application/json", .tallyCharge: charge]
        if replayed { headers[.idempotentReplayed] = "true" }
        let body = JSONValue.object(["error": error]).bytes
        return Response(status: .badGateway, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    // MARK: The hold and its settlement

    /// Holds the most `chat` can cost (402 with wallet and quotas when it cannot be held). A user premium at the hold,
    /// on a model whose `premium` is `free` or a quota, holds 0 tokens instead, for one use of the quota if so (402
    /// `quota_exhausted` when none is left): ``PremiumHold``.
    func hold(_ userId: String, _ chat: ChatRequest) async throws -> HeldCall {
        var call = HeldCall(userId: userId, holdId: UUID().uuidString.lowercased(), chat: chat)
        let now = clock.now
        let premium = premiumHold(chat.model)
        let command = Command.createHold(
            userId: userId, holdId: call.holdId, amount: chat.maxCost, expiresAt: now.addingTimeInterval(ai.holdTTL),
            note: "ai \(chat.model.name) prompt<=\(chat.promptBound) completion<=\(chat.completionLimit)"
                + (chat.measure.images.isEmpty ? "" : " images=\(chat.measure.imageTokens)"),
            premium: premium)
        let paid = Mutex<PremiumPaid?>(nil)
        _ = try await store.execute(command, idempotency: nil, now: now) { outcome in
            paid.withLock { $0 = PremiumPaid(premium, outcome: outcome) }
            return StoredResponse(status: 201, body: [])
        }
        notifier.walletChanged(userId: userId)
        call.premium = paid.withLock { $0 }
        return call
    }

    /// How a premium user's calls on `model` are held: nil when in tokens (`premium: tokens`); a quota the catalog
    /// does not declare has no use.
    func premiumHold(_ model: AIModelSpec) -> PremiumHold? {
        switch model.premium {
        case .tokens: return nil
        case .free: return .free
        case .quota(let name): return .quota(name, limit: catalog.quota(named: name)?.daily ?? 0)
        }
    }

    /// Posts the call upstream; a failure before the answer releases the hold and answers 4xx/5xx.
    func callUpstream(_ call: HeldCall) async throws -> HTTPClientResponse {
        let response: HTTPClientResponse
        do {
            response = try await ai.upstream.post(call.chat.upstreamBody)
        } catch {
            await settle(call, charge: nil, why: "upstream unreachable")
            throw APIError(.upstreamFailed, "The model could not be reached; nothing was charged.")
        }
        guard response.status == .ok else {
            let body = try? await response.body.collect(upTo: 64 << 10)
            await settle(call, charge: nil, why: "upstream \(response.status.code)")
            throw Self.upstreamError(
                status: Int(response.status.code), body: body.map { Array($0.readableBytesView) } ?? [], redaction: ai.redaction)
        }
        return response
    }

    /// What `call` is charged given the upstream's usage, if any, and the content chunks relayed: without usage, the
    /// prompt as this process estimates it from the model's completed calls (``PromptEstimates``).
    func charge(_ call: HeldCall, usage: ChatUsage?, chunks: Int) -> ChatCharge {
        ChatCharge.of(call.chat, usage: usage, chunks: chunks, estimatedPrompt: usage == nil ? ai.prompts.estimate(call.chat) : nil)
    }

    /// Captures `charge` under `idempotency` (the stored response `render` makes), or releases the hold when
    /// another request under the key captured first. Runs unstructured, so a client leaving cannot cancel it. A
    /// charge from the provider's usage teaches the model's prompt estimate.
    func capture(
        _ call: HeldCall, charge: ChatCharge, idempotency: IdempotencyKey?,
        render: @escaping @Sendable (AICharge) -> StoredResponse
    ) async throws -> Execution {
        let (store, clock) = (self.store, self.clock)
        if charge.fromUsage { ai.prompts.learn(call.chat, promptTokens: charge.promptTokens) }
        let (held, charged) = (call.held, Settlement(call, charge: charge).charged)
        let (call, execution) = try await onHoldOwner(call) { call in
            let command = Settlement(call, charge: charge).command
            let key = idempotency.map { IdempotencyKey(scope: call.userId, key: $0.key, fingerprint: $0.fingerprint) }
            return try await Task {
                try await store.execute(command, idempotency: key, now: clock.now) { outcome in
                    render(AICharge(
                        charged: charged, held: held, promptTokens: charge.promptTokens,
                        completionTokens: charge.completionTokens, wallet: Wallet(outcome.state.wallet)))
                }
            }.value
        }
        if execution.isReplay { await settle(call, charge: nil, why: "answered under the same key") }
        notifier.walletChanged(userId: call.userId)
        return execution
    }

    /// Runs `body` on `call`, and once more on the account its guest was merged into while it ran, whose hold it
    /// is now (``MergePlanner`` moves a live hold with the guest): so the answer is charged to the account, at most
    /// what it held. Returns the call as it ran last.
    func onHoldOwner<T: Sendable>(_ call: HeldCall, _ body: (HeldCall) async throws -> T) async throws -> (HeldCall, T) {
        do {
            return (call, try await body(call))
        } catch let error as StoreError where error.code == .userNotFound {
            guard let account = try await store.user(id: call.userId)?.mergedInto else { throw error }
            let moved = HeldCall(userId: account, holdId: call.holdId, chat: call.chat, premium: call.premium)
            return (moved, try await body(moved))
        }
    }

    /// Captures `charge`, or releases the hold when it is nil; returns the report (`nil` when the store failed). The
    /// store call runs unstructured. A database that is unavailable leaves the settlement to ``PendingSettlements``,
    /// which tries it again until the database answers; any other failure is logged and left to the hold's expiry,
    /// which releases it whole.
    @discardableResult
    func settle(_ call: HeldCall, charge: ChatCharge?, why: String = "") async -> AICharge? {
        let (store, clock) = (self.store, self.clock)
        let report = Mutex<AICharge?>(nil)
        let held = call.held
        let render: @Sendable (AICharge) -> StoredResponse = { charge in
            report.withLock { $0 = charge }
            return StoredResponse(status: 200, body: [])
        }
        do {
            if let charge {
                _ = try await capture(call, charge: charge, idempotency: nil, render: render)
            } else {
                let (call, _) = try await onHoldOwner(call) { call in
                    let command = Settlement(call, charge: nil, why: why).command
                    return try await Task {
                        try await store.execute(command, idempotency: nil, now: clock.now) { outcome in
                            render(AICharge(charged: 0, held: held, promptTokens: 0, completionTokens: 0, wallet: Wallet(outcome.state.wallet)))
                        }
                    }.value
                }
                notifier.walletChanged(userId: call.userId)
            }
        } catch where Self.databaseUnavailable(error) {
            ai.settlements.add(Settlement(call, charge: charge, why: why))
        } catch {
            Logger(label: "tally.ai").error(
                "could not settle an AI call's hold; it expires unsettled", metadata: ["hold": "\(call.holdId)", "error": "\(error)"])
        }
        return report.withLock { $0 }
    }

    /// Whether `error` says the database could not be reached (as the store reports it, or as an API error).
    static func databaseUnavailable(_ error: any Error) -> Bool {
        (error as? StoreError)?.code == .unavailable || (error as? APIError)?.body.error.code == .unavailable
    }

    /// The usage object of an answer or chunk, if it is one.
    static func usage(_ value: JSONValue?) -> ChatUsage? {
        guard let value, case .object = value,
            case .number(let prompt)? = value["prompt_tokens"], case .number(let completion)? = value["completion_tokens"],
            let promptTokens = Int(prompt), let completionTokens = Int(completion), promptTokens >= 0, completionTokens >= 0
        else { return nil }
        return ChatUsage(promptTokens: promptTokens, completionTokens: completionTokens)
    }

    /// The client's error for an upstream refusal: the request's own fault (400, 404, 413, 422) with the provider's
    /// message, keys taken out (`redaction`); the provider refusing the server's key, limiting it, or failing:
    /// 502/429 without its message.
    static func upstreamError(status: Int, body: [UInt8], redaction: KeyRedaction) -> APIError {
        let message = (try? JSONValue.parse(body))?["error"]?["message"]?.stringValue.map { String(redaction.redact($0).prefix(500)) }
        switch status {
        case 400, 404, 413, 422:
            return APIError(.invalidField, "The model refused the request: \(message ?? "status \(status)")", status: .badRequest)
        case 429:
            return APIError(.rateLimited, "The model's provider is limiting calls; retry later. Nothing was charged.", headers: [.retryAfter: "5"])
        default:
            return APIError(.upstreamFailed, "The model failed (status \(status)); nothing was charged.")
        }
    }
}

/// A call whose hold is open.
struct HeldCall: Sendable {
    let userId: String
    let holdId: String
    let chat: ChatRequest
    /// How a premium user's call is paid instead of tokens; nil: it holds, and is charged, tokens.
    var premium: PremiumPaid? = nil

    /// What the call holds: the most it can cost, or nothing when premium pays for it.
    var held: Int64 { premium == nil ? chat.maxCost : 0 }
}

/// How a premium user's AI call was paid instead of tokens (the model's `premium`): it is held and charged 0, and
/// recorded with the provider's counts and what it would have cost.
enum PremiumPaid: Sendable, Hashable {
    /// Free.
    case free
    /// With a quota use, given back if the call fails before answering.
    case quota(QuotaUse)

    /// How the hold `outcome` of a hold asked with `premium` was paid: nil when it holds tokens (no premium asked, or
    /// the user is not premium).
    init?(_ premium: PremiumHold?, outcome: CommandOutcome) {
        switch (premium, outcome.payment) {
        case (.free?, .premium?): self = .free
        case (.quota(let quota, _)?, .useQuota?):
            guard let use = QuotaUse(quota: quota, outcome: outcome) else { return nil }
            self = .quota(use)
        default: return nil
        }
    }

    /// The quota use to give back when the call's hold is released.
    var use: QuotaUse? {
        guard case .quota(let use) = self else { return nil }
        return use
    }
}

/// One of a user's concurrent-call slots, given back once (by the call, or when it is dropped unended).
final class CallSlot: Sendable {
    private let limiter: CallLimiter
    /// Whose slot.
    let userId: String
    private let ended = Mutex(false)

    init(limiter: CallLimiter, userId: String) { (self.limiter, self.userId) = (limiter, userId) }

    /// Gives the slot back (again: nothing).
    func end() {
        if ended.withLock({ ended in defer { ended = true }; return !ended }) { limiter.release(userId) }
    }

    deinit { end() }
}

extension HTTPField.Name {
    /// `Tally-Charge`: what an AI call was charged and the wallet after it (``AICharge``).
    static let tallyCharge = HTTPField.Name(AIGatewayProtocol.chargeHeader)!
}
