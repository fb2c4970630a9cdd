import Foundation
import TallyAPI

extension Client {
    /// The server's AI gateway, metered in the user's wallet: chat answers whole or streamed, and daily generations.
    public var ai: AIClient { AIClient(client: self) }
}

/// The server's AI gateway (`/v1/ai`), reached as `client.ai`: OpenAI's Chat Completions behind the user's
/// session, paid from the user's wallet. A handle, cheap to make: it holds only the client.
///
/// The server holds the most a call can cost while the model runs, then charges the real usage and returns the
/// rest. The cached wallet shows that hold at once: the SDK computes it exactly as the server does
/// (``hold(for:)``, from the models and prices of `GET /v1/ai/models`, fetched once and cached), unless the app
/// passes its own `estimate`. The wallet in the call's charge then replaces it, with no further request. If the
/// price list cannot be had (offline), the call shows as pending only (``QueryState/pendingMutations``).
///
/// ```swift
/// let completion = try await tally.ai.chat(model: "chat", messages: [ChatMessage(role: "user", content: question)])
/// answer = completion.choices.first?.message.content ?? ""
/// ```
public struct AIClient: Sendable {
    let client: Client

    /// The route template metrics record for whole answers.
    static let operation = "POST /v1/ai/chat/completions"

    /// Asks the model and returns its whole answer (`stream` in `request` is ignored: ``stream(_:estimate:intent:)``
    /// streams). The cached wallet shows `estimate` held at once and the server's wallet after the charge when
    /// the answer comes.
    ///
    /// Every attempt carries one Idempotency-Key, so an answer lost on the way (a dropped connection, a timeout)
    /// is asked for again and the server answers it from what it stored: charged once. Concurrent calls with
    /// the same key and request share one request.
    ///
    /// - Parameters:
    ///   - idempotencyKey: 1 to 255 printable ASCII characters (a message id); the same key and request later,
    ///     even after a relaunch, returns the first answer without a second charge. Nil: a key of its own.
    ///   - estimate: wallet tokens to show held while the call runs; nil: the hold the server will make (``hold(for:)``).
    /// - Throws: a ``ClientError``: ``ClientError/Code/insufficientTokens`` with the server's wallet (confirmed in
    ///   the cache, ready for a paywall); ``ClientError/Code/rateLimited`` when the user has too many calls in
    ///   flight; ``ClientError/Code/server`` with ``ClientError/serverCode`` `unknown_model` (404) or
    ///   `upstream_failed` (502: the model failed, nothing was charged); ``ClientError/Code/invalidInput`` for a
    ///   key that is not one.
    public func chat(
        _ request: ChatCompletionRequest, idempotencyKey: String? = nil, estimate: Int64? = nil
    ) async throws -> ChatCompletion {
        try await reply(to: request, idempotencyKey: idempotencyKey, estimate: estimate).completion
    }

    /// Asks `model` to continue `messages` and returns its whole answer, as ``chat(_:idempotencyKey:estimate:)``.
    /// - Parameter maxTokens: the most tokens the answer may have (the server caps it at the model's own limit).
    public func chat(
        model: String, messages: [ChatMessage], maxTokens: Int? = nil, idempotencyKey: String? = nil, estimate: Int64? = nil
    ) async throws -> ChatCompletion {
        try await chat(
            ChatCompletionRequest(model: model, messages: messages, maxTokens: maxTokens), idempotencyKey: idempotencyKey,
            estimate: estimate)
    }

    /// Asks the model as ``chat(_:idempotencyKey:estimate:)`` does, and returns the answer with what it cost.
    public func reply(
        to request: ChatCompletionRequest, idempotencyKey: String? = nil, estimate: Int64? = nil
    ) async throws -> AIChatReply {
        var request = request
        request.stream = nil
        request.streamOptions = nil
        let key = try idempotencyKey.map(Self.checked) ?? UUID().uuidString.lowercased()
        let estimate = await resolvedEstimate(estimate, for: request)
        let body = try TallyJSON.encoder().encode(request)
        // One key and one request: a double tap shares the call (one request, one estimate shown).
        let shared = "ai " + IdempotencyKey.derive(method: "POST", path: AIGatewayProtocol.chatCompletionsPath, body: body, intent: key)
        let client = self.client
        let (data, _) = try await client.writes.run(shared) {
            Coalescer<String, Data>.Start(
                operation: { try await Self.send(client, body: body, key: key, estimate: estimate) },
                onShared: { client.metrics.recordCoalesced(operation: Self.operation, count: $0) })
        }
        return try decodeAnswer(AIChatReply.self, data)
    }

    /// Streams the model's answer chunk by chunk; nothing is sent until the sequence is iterated. The same request
    /// streamed again while it still runs (a double-tapped Send) joins the call in flight — one model call, one
    /// charge — unless it carries another `intent`. See ``AIStream`` for what the wallet shows and how each failure
    /// ends it.
    ///
    /// ```swift
    /// var answer = ""
    /// for try await event in tally.ai.stream(model: "chat", messages: conversation) {
    ///     answer += event.content              // show it as it arrives
    ///     if let charge = event.charge { spent = charge.charged }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - estimate: wallet tokens to show held while the answer streams; nil: the server's hold (``hold(for:)``).
    ///   - intent: the user's intent in any words (a message id): iterations of the same request with the same intent
    ///     share one call while it runs; another intent is another call. Nil: the request alone decides.
    public func stream(_ request: ChatCompletionRequest, estimate: Int64? = nil, intent: String? = nil) -> AIStream {
        AIStream(client: client, request: request, estimate: estimate, intent: intent)
    }

    /// Streams `model`'s continuation of `messages`, as ``stream(_:estimate:intent:)``.
    /// - Parameter maxTokens: the most tokens the answer may have (the server caps it at the model's own limit).
    public func stream(
        model: String, messages: [ChatMessage], maxTokens: Int? = nil, estimate: Int64? = nil, intent: String? = nil
    ) -> AIStream {
        stream(ChatCompletionRequest(model: model, messages: messages, maxTokens: maxTokens), estimate: estimate, intent: intent)
    }

    /// The models the gateway offers with their prices (`GET /v1/ai/models`), cached for an hour.
    public var modelsQuery: Query<AIModelList> {
        Query(key: "ai.models", path: "/v1/ai/models", operation: "GET /v1/ai/models", staleAfter: 3600, maxAge: 7 * 86_400)
    }

    /// What the server will hold for `request`: the most it can cost, computed as the gateway computes it
    /// (``AIModelSpec/hold(for:)``) from the listed model — to show a price before sending.
    ///
    /// ```swift
    /// let most = try await tally.ai.hold(for: ChatCompletionRequest(model: "chat", messages: conversation))
    /// priceLabel = "up to \(most) tokens"
    /// ```
    /// - Throws: ``ClientError`` from fetching the list; ``ClientError/Code/invalidInput`` for a model it does not list;
    ///   the gateway's refusal of the request's content, as the server would answer it (``ClientError/Code/server``,
    ///   status 400, ``ClientError/serverCode`` `images_not_supported`, `too_many_images`, `image_too_large`,
    ///   `invalid_image`, `image_url_not_allowed`, `audio_not_supported` or `invalid_field`) — nothing is sent.
    public func hold(for request: ChatCompletionRequest) async throws -> Int64 {
        let model = try await self.model(named: request.model)
        do throws(AIContentRefusal) { return try model.hold(for: request) } catch {
            throw RequestExecutor.error(
                status: 400, detail: ErrorResponse(error: ErrorDetail(code: error.code, message: error.message)), retryAfter: nil)
        }
    }

    /// The model the gateway lists as `name`, with its prices and image rule (``modelsQuery``, fetched once and cached).
    /// - Throws: ``ClientError`` from fetching the list; ``ClientError/Code/invalidInput`` for a model it does not list.
    public func model(named name: String) async throws -> AIModelSpec {
        var models = client.value(modelsQuery)
        if models == nil { models = try await client.revalidate(modelsQuery) }
        guard let models else { throw ClientError(.offline) }
        guard let model = models.items.first(where: { $0.name == name }) else {
            throw ClientError(.invalidInput, message: "the server offers no model named \(name)")
        }
        return model
    }

    /// The hold to show: the caller's estimate, else the computed hold when the price list can be had.
    func resolvedEstimate(_ given: Int64?, for request: ChatCompletionRequest) async -> Int64? {
        if let given { return given }
        return try? await hold(for: request)
    }

    // MARK: Internals

    /// One call under `key` (retried with the same key by the executor), its hold shown and settled.
    private static func send(_ client: Client, body: Data, key: String, estimate: Int64?) async throws -> Data {
        let hold = AIWalletHold.begin(client: client, estimate: estimate)
        do {
            let response = try await client.executor.send(
                Endpoint(method: "POST", path: AIGatewayProtocol.chatCompletionsPath, operation: operation, kind: .ai),
                body: body, headers: [TallyHeader.idempotencyKey: key], auth: client.session)
            // Charged, whatever the body says: the wallet is settled before the answer is read.
            let charge = response.header(AIGatewayProtocol.chargeHeader).flatMap {
                try? TallyJSON.decoder().decode(AICharge.self, from: Data($0.utf8))
            }
            hold.settle(charge.map(AIWalletHold.Outcome.charged) ?? .unknown)
            let completion = try decodeAnswer(ChatCompletion.self, response.body)
            let replayed = response.header(TallyHeader.idempotentReplayed) == "true"
            return try TallyJSON.encoder().encode(AIChatReply(completion: completion, charge: charge, isReplay: replayed))
        } catch {
            hold.settle(.failed(error))
            throw error
        }
    }

    /// `key` if the server takes it as an Idempotency-Key: 1 to 255 printable ASCII characters.
    static func checked(_ key: String) throws -> String {
        guard (1...255).contains(key.utf8.count), key.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw ClientError(.invalidInput, message: "an idempotency key is 1 to 255 printable ASCII characters")
        }
        return key
    }
}

/// A whole answer of the AI gateway with what it cost: ``AIClient/reply(to:idempotencyKey:estimate:)``.
public struct AIChatReply: Codable, Sendable, Hashable {
    /// The model's answer, as the provider sent it.
    public var completion: ChatCompletion
    /// What the call was charged and the wallet after it (the cached wallet already shows it); nil if the server
    /// did not say (the wallet is then refetched where it is observed).
    public var charge: AICharge?
    /// Whether the server answered from what it stored for this Idempotency-Key (an earlier call's answer,
    /// charged then, not now).
    public var isReplay: Bool

    /// Creates a reply (an app's tests can make the replies the SDK returns).
    public init(completion: ChatCompletion, charge: AICharge?, isReplay: Bool) {
        self.completion = completion
        self.charge = charge
        self.isReplay = isReplay
    }

    /// The answer's text: the first choice's message (empty when there is none).
    public var text: String { completion.choices.first?.message.content ?? "" }
}
