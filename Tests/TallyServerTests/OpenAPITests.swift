import Foundation
import Hummingbird
import Prometheus
@testable import TallyServer
import TallySQLite
import TallyStore
import TallyAppStore
import TallyDevAppStore
import Testing
import Yams

/// Keeps `openapi.yaml` (at the repository root) in step with the real router: every route is
/// documented, every documented operation exists, and the document is internally consistent.
@Suite("openapi.yaml documents the router", .timeLimit(.minutes(2)))
struct OpenAPITests {
    /// The HTTP methods an OpenAPI path item can hold.
    static let operationKeys = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]

    /// `openapi.yaml` next to `Package.swift`, found from this file's location.
    static let specURL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // TallyServerTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()  // repository root
        .appendingPathComponent("openapi.yaml")

    /// The listeners as `servers` entries name them.
    static let publicListener = "http://127.0.0.1:8080"
    static let adminListener = "http://127.0.0.1:9090"

    @Test(
        "Each listener's routes are exactly the documented operations whose servers name it",
        arguments: [publicListener, adminListener])
    func routesMatch(listener: String) throws {
        let spec = try Self.loadSpec()
        let documented = try Set(Self.operations(spec).filter { Self.servers(of: $0.key, in: spec).contains(listener) }.map(\.key))
        let routers = try Self.routerRoutes()
        let routed = listener == Self.adminListener ? routers.admin : routers.api
        let undocumented = routed.subtracting(documented).sorted()
        let unrouted = documented.subtracting(routed).sorted()
        #expect(
            undocumented.isEmpty,
            "Routes of the \(listener) listener missing from openapi.yaml or not naming it in servers: \(undocumented.joined(separator: ", "))")
        #expect(
            unrouted.isEmpty,
            "Operations in openapi.yaml naming \(listener) with no route on that listener: \(unrouted.joined(separator: ", "))")
        #expect(!routed.isEmpty, "the \(listener) listener's router registered no routes")
    }

    @Test("The public listener serves neither /metrics nor the admin API")
    func publicListenerHasNoOperatorRoutes() throws {
        let api = try Self.routerRoutes().api
        #expect(!api.contains("GET /metrics"))
        #expect(api.allSatisfy { !$0.contains(" /admin") }, "\(api.sorted())")
    }

    @Test("Every operation has a summary and a 2xx or 3xx response")
    func operationsAreComplete() throws {
        let spec = try Self.loadSpec()
        #expect((spec["openapi"] as? String)?.hasPrefix("3.1") == true, "openapi.yaml must declare OpenAPI 3.1")
        let operations = try Self.operations(spec)
        #expect(!operations.isEmpty)
        for (key, operation) in operations.sorted(by: { $0.key < $1.key }) {
            let summary = (operation["summary"] as? String)?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            #expect(!summary.isEmpty, "\(key) has no summary")
            let statuses = Self.mapping(operation["responses"])?.keys.map { $0 } ?? []
            #expect(
                statuses.contains { $0.hasPrefix("2") || $0.hasPrefix("3") },
                "\(key) has no 2xx or 3xx response (has: \(statuses.sorted().joined(separator: ", ")))")
        }
    }

    @Test("Every path template parameter is declared as a path parameter")
    func pathParametersDeclared() throws {
        let spec = try Self.loadSpec()
        guard let paths = Self.mapping(spec["paths"]) else {
            Issue.record("openapi.yaml has no 'paths'")
            return
        }
        for (path, item) in paths.sorted(by: { $0.key < $1.key }) {
            guard let item = Self.mapping(item) else { continue }
            let templated = Set(Self.templateParameters(path))
            let shared = Self.pathParameterNames(item["parameters"], spec: spec)
            for method in Self.operationKeys {
                guard let operation = Self.mapping(item[method]) else { continue }
                let declared = shared.union(Self.pathParameterNames(operation["parameters"], spec: spec))
                #expect(
                    declared == templated,
                    "\(method.uppercased()) \(path): path parameters declared \(declared.sorted()), template has \(templated.sorted())")
            }
        }
    }

    @Test("Every $ref resolves inside openapi.yaml")
    func referencesResolve() throws {
        let spec = try Self.loadSpec()
        var references: [(location: String, ref: String)] = []
        Self.collectReferences(spec, location: "#", into: &references)
        #expect(!references.isEmpty)
        let broken = references.filter { Self.resolve($0.ref, in: spec) == nil }
        #expect(
            broken.isEmpty,
            "Unresolvable $ref: \(broken.map { "\($0.ref) (at \($0.location))" }.joined(separator: ", "))")
    }

    @Test("Every wire type has a schema")
    func wireTypesHaveSchemas() throws {
        let schemas = Self.mapping(Self.mapping(try Self.loadSpec()["components"])?["schemas"]) ?? [:]
        let expected = [
            "Wallet", "LedgerEntry", "EntryPage", "Hold", "CreateHoldRequest", "CaptureHoldRequest", "GrantRequest",
            "GrantResponse", "PremiumRequest", "Quota", "QuotaList", "ActionPrice", "ActionList", "ActionResult",
            "SessionTokens", "GuestSignInRequest", "RefreshRequest", "CredentialsRequest", "Me", "UpdateMeRequest",
            "ChangePasswordRequest", "ForgotPasswordRequest", "ResetPasswordRequest", "VerifyEmailRequest",
            "AdminUserView", "HealthStatus", "ErrorResponse", "CollectionInfo", "CollectionList", "Document", "DocumentPage",
            "PutDocumentRequest", "MergePatch", "SyncMutation", "SyncPushRequest", "SyncMutationResult", "SyncPushResponse",
            "SyncPullResponse", "SyncChangedEvent", "SyncWalletEvent", "ChatCompletionRequest", "ChatCompletion", "AICharge", "AIModelList",
            "DailyGeneration", "RedeemPurchaseRequest", "AppStoreNotificationRequest", "Purchase", "PurchaseResponse", "PurchasePage",
            "NotificationReceipt", "AppleSignInRequest", "AppleIDNotificationRequest", "GuestProgress", "MergeSummary", "MergedDocumentConflict",
        ]
        let missing = expected.filter { schemas[$0] == nil }
        #expect(missing.isEmpty, "components/schemas lacks: \(missing.joined(separator: ", "))")
    }

    @Test("Router paths are normalised to OpenAPI templates")
    func normalisation() {
        #expect(Self.normalise("/v1/wallet/holds/:holdId/capture") == "/v1/wallet/holds/{holdId}/capture")
        #expect(Self.normalise("/v1/wallet/holds/{holdId}") == "/v1/wallet/holds/{holdId}")
        #expect(Self.normalise("v1/me/") == "/v1/me")
        #expect(Self.normalise("/") == "/")
    }

    // MARK: - The router

    /// The `servers` URLs an operation ("METHOD /path") is served by: its path item's, else the document's.
    static func servers(of operation: String, in spec: [String: Any]) -> Set<String> {
        let path = String(operation.split(separator: " ", maxSplits: 1)[1])
        let item = mapping(mapping(spec["paths"])?[path])
        let list = (item?["servers"] as? [Any]) ?? (spec["servers"] as? [Any]) ?? []
        return Set(list.compactMap { mapping($0)?["url"] as? String })
    }

    /// "METHOD /path" of every route of the public router (`buildRouter`) and of the admin listener's
    /// (`buildAdminRouter`), paths in OpenAPI form.
    static func routerRoutes() throws -> (api: Set<String>, admin: Set<String>) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-openapi-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteStore(path: directory.appendingPathComponent("tally.sqlite").path)
        var configuration = TallyConfiguration()
        configuration.bcryptCost = 4
        configuration.adminKey = "openapi-test-admin-key"
        configuration.dataDirectory = directory.path
        configuration.ai = AIConfiguration(
            upstream: AIUpstream(baseURL: "http://127.0.0.1:1/v1", apiKey: nil), models: [AIGatewayTests.model])
        configuration.appStore = try AppStoreConfiguration(
            bundleId: "com.example.oracle", environments: [.sandbox], products: [AppStoreProduct(productId: "com.example.tokens.100", grant: .tokens(100))])
        var serverAPI = AppStoreServerAPIClient.Configuration()
        (serverAPI.productionURL, serverAPI.sandboxURL) = ("http://127.0.0.1:1", "http://127.0.0.1:1")
        configuration.appStore?.serverAPI = AppStoreServerAPISettings(
            signer: try AppStoreServerAPIToken(
                credentials: .init(keyId: "2X9R4HXF34", issuerId: UUID().uuidString, bundleId: "com.example.oracle"),
                privateKeyPEM: DevServerAPIKey.generate().privateKeyPEM),
            configuration: serverAPI, privateKeyEnv: "TALLY_APPSTORE_KEY")
        configuration.signInWithApple = try SignInWithAppleConfiguration(audiences: ["com.example.oracle"], keysURL: "http://127.0.0.1:1/auth/keys")
        let registry = PrometheusCollectorRegistry()
        let services = TallyServices(
            store: store, clock: SystemClock(), configuration: configuration, metrics: PrometheusMetricsFactory(registry: registry))
        func routes(_ router: Router<TallyRequestContext>) -> Set<String> {
            Set(router.routes.map { "\($0.method.rawValue.uppercased()) \(normalise($0.path.description))" })
        }
        return (routes(buildRouter(services: services)), routes(buildAdminRouter(services: services, registry: registry)))
    }

    /// A router path in OpenAPI form: leading slash, no trailing slash, `:name` written `{name}`.
    static func normalise(_ path: String) -> String {
        let components = path.split(separator: "/", omittingEmptySubsequences: true).map { component in
            component.hasPrefix(":") ? "{\(component.dropFirst())}" : String(component)
        }
        return "/" + components.joined(separator: "/")
    }

    /// The `{name}`s of an OpenAPI path template, in order.
    static func templateParameters(_ path: String) -> [String] {
        path.split(separator: "/").filter { $0.hasPrefix("{") && $0.hasSuffix("}") }.map { String($0.dropFirst().dropLast()) }
    }

    // MARK: - The document

    static func loadSpec() throws -> [String: Any] {
        let text = try String(contentsOf: specURL, encoding: .utf8)
        guard let spec = mapping(try Yams.load(yaml: text)) else {
            throw SpecError("\(specURL.path) is not a YAML mapping")
        }
        return spec
    }

    /// Every operation of the document, keyed "METHOD /path".
    static func operations(_ spec: [String: Any]) throws -> [String: [String: Any]] {
        guard let paths = mapping(spec["paths"]) else { throw SpecError("openapi.yaml has no 'paths'") }
        var operations: [String: [String: Any]] = [:]
        for (path, item) in paths {
            guard let item = mapping(item) else { throw SpecError("path item \(path) is not a mapping") }
            for method in operationKeys {
                if let operation = mapping(item[method]) {
                    operations["\(method.uppercased()) \(path)"] = operation
                }
            }
        }
        return operations
    }

    /// Names of the `in: path` parameters of a parameter list, following `$ref`s.
    static func pathParameterNames(_ parameters: Any?, spec: [String: Any]) -> Set<String> {
        guard let list = parameters as? [Any] else { return [] }
        var names = Set<String>()
        for entry in list {
            var parameter = mapping(entry)
            if let ref = parameter?["$ref"] as? String { parameter = mapping(resolve(ref, in: spec)) }
            if let parameter, parameter["in"] as? String == "path", let name = parameter["name"] as? String {
                names.insert(name)
            }
        }
        return names
    }

    static func collectReferences(_ node: Any, location: String, into references: inout [(location: String, ref: String)]) {
        if let map = mapping(node) {
            for (key, value) in map {
                if key == "$ref" {
                    references.append((location, value as? String ?? "\(value)"))
                } else {
                    collectReferences(value, location: "\(location)/\(key)", into: &references)
                }
            }
        } else if let list = node as? [Any] {
            for (index, value) in list.enumerated() {
                collectReferences(value, location: "\(location)/\(index)", into: &references)
            }
        }
    }

    /// The node a local reference (`#/a/b~1c`) points to, or `nil`.
    static func resolve(_ ref: String, in spec: [String: Any]) -> Any? {
        guard ref.hasPrefix("#/") else { return nil }
        var node: Any = spec
        for token in ref.dropFirst(2).split(separator: "/", omittingEmptySubsequences: false) {
            let key = token.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
            if let map = mapping(node), let next = map[key] {
                node = next
            } else if let list = node as? [Any], let index = Int(key), list.indices.contains(index) {
                node = list[index]
            } else {
                return nil
            }
        }
        return node
    }

    /// A YAML mapping with its keys as strings (Yams builds `[AnyHashable: Any]`; keys like `200` may be numbers).
    static func mapping(_ node: Any?) -> [String: Any]? {
        if let map = node as? [String: Any] { return map }
        guard let map = node as? [AnyHashable: Any] else { return nil }
        var result: [String: Any] = [:]
        for (key, value) in map { result["\(key.base)"] = value }
        return result
    }

    struct SpecError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
