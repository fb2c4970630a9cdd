import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import TallyAPI
import TallyServer
import Testing

/// An app that embeds the server adds routes of its own on Tally's identity, as docs/embedding.md shows:
/// the sample there is the block marked below, compiled here and run over real HTTP on loopback.
@Suite("Embedding", .timeLimit(.minutes(10)))
struct EmbeddingTests {
    @Test("An embedding app's own route takes a verified token and gets the user from it; without one, 401 JSON")
    func appRouteOnTallysIdentity() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-embed-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = TallyConfiguration()
        configuration.port = 0
        configuration.adminPort = 0
        configuration.bcryptCost = 4
        configuration.dataDirectory = directory

        // docs/embedding.md: from here …
        let app = try buildApplication(configuration: configuration, configureRouter: { router, services in
            router.group("app")
                .add(middleware: AuthMiddleware(services: services))   // a verified access token, or 401
                .group(context: AuthenticatedContext.self)             // so `context.identity` is not optional
                .get("greeting") { _, context in
                    "Hello, \(context.identity.userId)"                // the user id comes from the token alone
                }
        })
        // … to here.

        try await app.test(.live) { client in
            func send(_ method: HTTPRequest.Method, _ path: String, token: String? = nil, json: (any Encodable)? = nil, headers: HTTPFields = [:]) async throws -> TestResponse {
                var headers = headers
                if let token { headers[.authorization] = "Bearer \(token)" }
                if json != nil { headers[.contentType] = "application/json" }
                let body = try json.map { ByteBuffer(bytes: try TallyJSON.encoder().encode($0)) }
                return try await client.execute(uri: path, method: method, headers: headers, body: body)
            }
            func errorCode(_ response: TestResponse) -> String? {
                try? TallyJSON.decoder().decode(ErrorResponse.self, from: Data(buffer: response.body)).error.code.rawValue
            }
            let signIn = try await send(.post, "/v1/auth/guest", json: GuestSignInRequest(deviceId: "device-" + UUID().uuidString))
            let alice = try TallyJSON.decoder().decode(SessionTokens.self, from: Data(buffer: signIn.body))
            let bob = try TallyJSON.decoder().decode(
                SessionTokens.self,
                from: Data(buffer: try await send(.post, "/v1/auth/guest", json: GuestSignInRequest(deviceId: "device-" + UUID().uuidString)).body))

            let greeting = try await send(.get, "/app/greeting", token: alice.accessToken)
            #expect(greeting.status == .ok)
            #expect(String(buffer: greeting.body) == "Hello, \(alice.userId)")
            // A user id the client sends is ignored: the token decides.
            let spoofed = try await send(.get, "/app/greeting", token: bob.accessToken, headers: [HTTPField.Name("X-User-Id")!: alice.userId])
            #expect(String(buffer: spoofed.body) == "Hello, \(bob.userId)")

            let forged = String(alice.accessToken.dropLast(2)) + "xx"
            for (name, token) in [("no token", nil), ("a forged token", forged), ("not a token", "not-a-token")] as [(String, String?)] {
                let refused = try await send(.get, "/app/greeting", token: token)
                #expect(refused.status == .unauthorized, "\(name)")
                #expect(refused.headers[.contentType]?.hasPrefix("application/json") == true, "\(name)")
                #expect(errorCode(refused) == "unauthorized", "\(name): \(String(buffer: refused.body))")
            }
            // A signed-out session's token no longer reaches the app's route.
            #expect(try await send(.post, "/v1/auth/sign-out", token: alice.accessToken).status == .noContent)
            let signedOut = try await send(.get, "/app/greeting", token: alice.accessToken)
            #expect(signedOut.status == .unauthorized && errorCode(signedOut) == "unauthorized")
            #expect(try await send(.get, "/app/greeting", token: bob.accessToken).status == .ok)
        }
    }
}
