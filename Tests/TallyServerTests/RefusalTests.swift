import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import TallyAPI
@testable import TallyServer
import TallyStore
import Testing
import Yams

/// A store's refusal becomes an answer in one place (the error middleware): a 402 always carries the caller's
/// wallet and quotas, whichever route it came from and whether or not the route knew about it.
@Suite("Refusals carry the account state", .timeLimit(.minutes(10)))
struct RefusalTests {
    @Test("A route that lets a store refusal through, with no helper (an embedding app's), answers 402 with the wallet and quotas")
    func routeWithoutHelper() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-refusal-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = TallyConfiguration()
        (configuration.port, configuration.adminPort, configuration.bcryptCost, configuration.dataDirectory) = (0, 0, 4, directory)
        let app = try buildApplication(configuration: configuration, configureRouter: { router, services in
            router.group("app").add(middleware: AuthMiddleware(services: services)).group(context: AuthenticatedContext.self)
                .post("spend") { _, context -> Response in
                    // The app's own metered work: whatever the store refuses is simply thrown.
                    let action = try #require(services.catalog.action(named: "ai.query"))
                    let execution = try await services.store.execute(
                        .performAction(userId: context.identity.userId, action: action, quotaLimit: nil), idempotency: nil,
                        now: services.clock.now
                    ) { _ in StoredResponse(status: 200, body: []) }
                    return Response(status: .init(code: execution.response.status))
                }
        })
        try await app.test(.live) { client in
            let signIn = try await client.execute(
                uri: "/v1/auth/guest", method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(bytes: try TallyJSON.encoder().encode(GuestSignInRequest(deviceId: "device-" + UUID().uuidString))))
            let tokens = try TallyJSON.decoder().decode(SessionTokens.self, from: Data(buffer: signIn.body))
            let refused = try await client.execute(uri: "/app/spend", method: .post, headers: [.authorization: "Bearer \(tokens.accessToken)"])
            #expect(refused.status.code == 402)
            let body = try TallyJSON.decoder().decode(ErrorResponse.self, from: Data(buffer: refused.body))
            #expect(body.error.code == .insufficientTokens)
            #expect(body.wallet == Wallet(balance: 0, held: 0, version: 0), "\(String(buffer: refused.body))")
            #expect(body.quotas?.map(\.name) == ["readings"], "\(String(buffer: refused.body))")
        }
    }

    /// How to make each operation that openapi.yaml says may answer 402 refuse a guest with no tokens.
    static let recipes: [String: @Sendable (APIConnection, TestUser) async throws -> APIResponse] = [
        "POST /v1/actions/{name}": { api, user in
            try await api.send(.post, "/v1/actions/ai.query", token: user.accessToken, headers: [.idempotencyKey: "refused"])
        },
        "POST /v1/wallet/holds": { api, user in
            try await api.send(.post, "/v1/wallet/holds", token: user.accessToken, json: CreateHoldRequest(amount: 5, ttlSeconds: 60))
        },
        "PUT /v1/collections/{collection}/docs/{docId}": { api, user in
            try await api.putDocument(user, "answers", "a1", .object(["text": .string("paid for")]))
        },
        "POST /v1/ai/chat/completions": { api, user in
            try await api.send(
                .post, "/v1/ai/chat/completions", token: user.accessToken,
                json: ChatCompletionRequest(model: "chat", messages: [ChatMessage(role: "user", content: "hello")]))
        },
        "GET /v1/ai/daily/{name}": { api, user in try await api.send(.get, "/v1/ai/daily/today", token: user.accessToken) },
    ]

    @Test("Every operation openapi.yaml documents with a 402 answers it with the wallet and quotas", arguments: StoreKind.allCases)
    func everyDocumentedRefusal(_ kind: StoreKind) async throws {
        let documented = try Self.operationsAnswering402()
        #expect(documented.count >= 5, "\(documented)")
        #expect(documented == Set(Self.recipes.keys), "a recipe per documented 402 (and no other)")
        let answers = try #require(Catalog.standard.action(named: "ai.query"))
        // Nothing here reaches the upstream: every call is refused before it.
        let model = AIModelSpec(name: "chat", upstreamModel: "dev", promptTokensPerCredit: 10, completionTokensPerCredit: 5, maxCompletionTokens: 40)
        let daily = DailyGenerationSpec(
            name: "today", model: model, prompt: try PromptTemplate("A line for {{date}}.", params: [], hasProfile: false, place: "test"),
            action: answers, quotaLimit: nil, params: [], profileDocument: nil)
        try await LiveServer.with(kind, configure: { configuration in
            configuration.sync.collections = [CollectionSpec(name: "answers", action: answers, quotaLimit: nil)]
            configuration.ai = AIConfiguration(
                upstream: AIUpstream(baseURL: "http://127.0.0.1:9/v1", apiKey: nil), models: [model], dailyGenerations: [daily])
        }) { server in
            let api = server.connection()
            defer { Task { await api.close() } }
            let user = try await api.newGuest()
            for (operation, recipe) in Self.recipes.sorted(by: { $0.key < $1.key }) {
                let refused = try await recipe(api, user)
                #expect(refused.status.code == 402, "\(operation): \(refused.status) \(refused.text)")
                let body = try? refused.decode(ErrorResponse.self)
                #expect(body?.wallet == Wallet(balance: 0, held: 0, version: 0), "\(operation): \(refused.text)")
                #expect(body?.quotas?.map(\.name) == ["readings"], "\(operation): \(refused.text)")
            }
        }
    }

    /// `METHOD /path` of every operation in openapi.yaml with a `402` response.
    static func operationsAnswering402() throws -> Set<String> {
        let text = try String(contentsOf: OpenAPITests.specURL, encoding: .utf8)
        guard let spec = try Yams.load(yaml: text) as? [String: Any], let paths = spec["paths"] as? [String: Any] else { return [] }
        var operations = Set<String>()
        for (path, item) in paths {
            for (method, operation) in item as? [String: Any] ?? [:] where OpenAPITests.operationKeys.contains(method) {
                let responses = (operation as? [String: Any])?["responses"] as? [AnyHashable: Any] ?? [:]
                if responses.keys.contains(where: { "\($0)" == "402" }) { operations.insert("\(method.uppercased()) \(path)") }
            }
        }
        return operations
    }
}
