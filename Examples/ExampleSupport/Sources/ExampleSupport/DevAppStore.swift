import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A real `tally-dev dev-appstore` as a child process: the local App Store that signs purchases as StoreKit 2 does and
/// posts App Store Server Notifications V2 to a server's webhook. The app buys from it (the example's storefront);
/// the tests play Apple's side with it: a refund, a subscription's expiry, and when a notification arrived.
///
/// It also plays Apple's Sign in with Apple (`GET /auth/keys`, `POST /auth/identity-token`): the tests mint the
/// identity token Apple would give the app with ``identityToken(sub:nonce:email:)``.
///
/// The server must trust its root (`appStore.rootCertificates`) and know where Apple's keys are
/// (`signInWithApple.keysURL`) before it starts, and the dev App Store must know the server's webhook when it starts:
/// ``startWithServer(config:directory:certificates:subscriptions:devLLM:)`` does it in that order.
public final class DevAppStore: @unchecked Sendable {
    /// Its HTTP API's base URL (`POST /purchase`, `POST /transactions/{id}/…`, `GET /deliveries`).
    public let baseURL: URL
    /// The directory of its certificate authority (`root.der` is the root a server trusts) and of its Sign in with
    /// Apple keys (`apple-id-keys.json`).
    public let certificates: URL
    /// The base URL of the process that plays Apple's sign-in for this one (`GET /auth/keys`,
    /// `POST /auth/identity-token`): its own, unless ``startWithServer(config:directory:certificates:subscriptions:devLLM:)``
    /// started a second `tally-dev dev-appstore` for it.
    public var appleIDURL: URL { appleID?.baseURL ?? baseURL }
    private let process: ChildProcess
    /// The `tally-dev dev-appstore` playing Apple's sign-in, stopped with this one (nil: this one plays it).
    private var appleID: DevAppStore?

    /// A notification the dev App Store signed (and queued for the webhook, when it has one).
    public struct Notification: Decodable, Sendable, Hashable {
        /// Its id: the same in each delivery of it.
        public var notificationUUID: String
        /// `ONE_TIME_CHARGE`, `SUBSCRIBED`, `REFUND`, `EXPIRED`, …
        public var notificationType: String
        /// `INITIAL_BUY`, `VOLUNTARY`, …
        public var subtype: String?
    }

    /// One notification's delivery to the webhook, as `GET /deliveries` reports it.
    public struct Delivery: Decodable, Sendable, Hashable {
        /// One POST to the webhook: its answer's status, or why there was none.
        public struct Attempt: Decodable, Sendable, Hashable {
            public var status: Int?
            public var error: String?
        }

        public var notificationUUID: String
        public var notificationType: String
        /// `pending`, `retrying`, `delivered` (answered 200-206) or `failed`.
        public var state: String
        public var attempts: [Attempt]
    }

    /// Starts `tally-dev dev-appstore` on a free port with its CA in `certificates` (made there on first use), posting
    /// notifications to `webhook` (nil: none are sent), each product of `subscriptions` an auto-renewable
    /// subscription (others are consumables); returns once it listens. Its output goes into `certificates`' parent.
    public init(certificates: URL, webhook: URL?, subscriptions: [String] = []) async throws {
        self.certificates = certificates
        let parent = certificates.deletingLastPathComponent()
        try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
        var arguments = ["dev-appstore", "--port", "0", "--certs", certificates.path]
        if let webhook { arguments += ["--webhook", webhook.absoluteString] }
        for product in subscriptions { arguments += ["--subscription", product] }
        process = try ChildProcess(
            try TallyServer.devBinary, arguments, output: parent.appendingPathComponent("dev-appstore-\(UUID().uuidString.prefix(8)).out"))
        baseURL = try await process.awaitOutput("tally-dev dev-appstore") { text in
            let prefix = "tally dev-appstore listening on "
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return nil }
            return line.dropFirst(prefix.count).split(separator: " ").first.flatMap { URL(string: String($0)) }
        }
    }

    /// Stops it (SIGTERM) and waits for it, and the process playing Apple's sign-in for it, if another.
    public func stop() async throws {
        process.signal()
        _ = try await process.wait()
        try await appleID?.stop()
    }

    /// A `tally serve` that sells through a `tally-dev dev-appstore`, both started and ready: `config` (whose
    /// `appStore.rootCertificates` names `<certificates>/root.der`, relative to the file) is copied into `directory`
    /// beside a new CA in `directory/<certificates>`; the CA (and the Sign in with Apple keys) is written first by a
    /// dev App Store started without a webhook, the server started on the copy (data in `directory/server`), then
    /// the dev App Store posting to the server's `/v1/webhooks/appstore`.
    ///
    /// When `config` has a `signInWithApple:` section, the first dev App Store keeps running as Apple's sign-in
    /// (Apple's two services, two processes over the same keys, so that neither needs the other's port in advance):
    /// the copy's `keysURL:` line is pointed at its `/auth/keys` (the section must have one), and the returned dev
    /// App Store's ``identityToken(sub:nonce:email:)`` asks it. Otherwise the first one is stopped.
    ///
    /// With `devLLM` (the config has an `ai:` section), the copy's `ai.upstream.baseURL` is pointed at it and the
    /// server is given the key it wants (``DevLLM/pointUpstream(of:)``, ``DevLLM/environment``).
    public static func startWithServer(
        config: URL, directory: URL, certificates: String = ".dev-appstore", subscriptions: [String] = [], devLLM: DevLLM? = nil
    ) async throws -> (server: TallyServer, appStore: DevAppStore) {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let copy = directory.appendingPathComponent(config.lastPathComponent)
        var text = try String(contentsOf: config, encoding: .utf8)
        let authority = directory.appendingPathComponent(certificates, isDirectory: true)
        var appleID: DevAppStore? = try await DevAppStore(certificates: authority, webhook: nil)
        if let keys = appleID.map({ $0.baseURL.appendingPathComponent("auth/keys") }), let pointed = try pointKeysURL(of: text, at: keys) {
            text = pointed
        } else {
            try await appleID?.stop()
            appleID = nil
        }
        if let devLLM { text = try devLLM.pointUpstream(of: text) }
        try? FileManager.default.removeItem(at: copy)
        try Data(text.utf8).write(to: copy)
        let server = try await TallyServer(
            config: copy, dataDirectory: directory.appendingPathComponent("server"), environment: devLLM?.environment ?? [:])
        let webhook = server.baseURL.appendingPathComponent("v1/webhooks/appstore")
        let appStore = try await DevAppStore(certificates: authority, webhook: webhook, subscriptions: subscriptions)
        appStore.appleID = appleID
        return (server, appStore)
    }

    /// `config`'s text with its `signInWithApple:` section's `keysURL:` line set to `keys`; nil when it has no such
    /// section; throws when the section has no such line (the server would fetch Apple's real keys).
    static func pointKeysURL(of config: String, at keys: URL) throws -> String? {
        try ConfigLines.set("keysURL", inSection: "signInWithApple", to: keys.absoluteString, of: config)
    }

    // MARK: Apple's side

    /// Refunds transaction `transactionId` in full (`REFUND`, sent to the webhook).
    @discardableResult
    public func refund(_ transactionId: String) async throws -> Notification {
        try await event("refund", of: transactionId)
    }

    /// Expires the subscription transaction `transactionId` belongs to (`EXPIRED`/`VOLUNTARY`, sent to the webhook).
    @discardableResult
    public func expire(_ transactionId: String) async throws -> Notification {
        try await event("expire", of: transactionId)
    }

    /// `POST /transactions/{transactionId}/{event}` (renew, refund, expire, revoke, …): its notification.
    public func event(_ event: String, of transactionId: String) async throws -> Notification {
        struct Answer: Decodable { var notification: Notification }
        return try await request("POST", "transactions/\(transactionId)/\(event)", as: Answer.self).notification
    }

    /// Every delivery so far, in the order queued (`GET /deliveries`).
    public func deliveries() async throws -> [Delivery] {
        struct Answer: Decodable { var deliveries: [Delivery] }
        return try await request("GET", "deliveries", as: Answer.self).deliveries
    }

    /// Waits until the webhook answered `notification` 200-206 (polling every 20 ms, at most `limit`: the server is
    /// another process); throws when its delivery failed or the time is up.
    public func waitUntilDelivered(_ notification: Notification, limit: Duration = .seconds(10)) async throws {
        let deadline = ContinuousClock.now + limit
        var last: Delivery?
        while ContinuousClock.now < deadline {
            last = try await deliveries().last { $0.notificationUUID == notification.notificationUUID }
            if last?.state == "delivered" { return }
            if last?.state == "failed" { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ExampleError("\(notification.notificationType) was not delivered: \(last.map { "\($0)" } ?? "never queued")")
    }

    /// What Apple gives the app when the user signs in (`ASAuthorizationAppleIDCredential`), minted by the process
    /// playing Apple's sign-in.
    public struct AppleIDCredential: Decodable, Sendable, Hashable {
        /// The identity token (a JWT signed with a key of `GET /auth/keys`), for the app's bundle id.
        public var identityToken: String
        /// A one-time code the server may exchange for Apple's refresh token.
        public var authorizationCode: String
        /// The Apple user id: the same for the same person on every device.
        public var sub: String
    }

    /// Signs Apple user `sub` in, as Apple would in the app (`POST /auth/identity-token` of ``appleIDURL``): the
    /// token carries the SHA-256 of the raw `nonce` the app made, and `email` (a relay address or the user's) if given.
    public func identityToken(sub: String, nonce: String, email: String? = nil) async throws -> AppleIDCredential {
        struct Body: Encodable {
            var sub: String
            var nonce: String
            var email: String?
        }
        let body = try JSONEncoder().encode(Body(sub: sub, nonce: nonce, email: email))
        return try await request("POST", "auth/identity-token", of: appleIDURL, body: body, as: AppleIDCredential.self)
    }

    private func request<Answer: Decodable>(
        _ method: String, _ path: String, of base: URL? = nil, body: Data = Data("{}".utf8), as _: Answer.Type
    ) async throws -> Answer {
        var request = URLRequest(url: (base ?? baseURL).appendingPathComponent(path))
        request.httpMethod = method
        if method == "POST" {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = body
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        guard (response as? HTTPURLResponse)?.statusCode == 200 else {
            throw ExampleError("dev-appstore \(method) /\(path) answered \(String(decoding: data, as: UTF8.self))")
        }
        return try JSONDecoder().decode(Answer.self, from: data)
    }
}
