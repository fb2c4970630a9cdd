import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A real `tally dev-appstore` as a child process: the local App Store that signs purchases as StoreKit 2 does and
/// posts App Store Server Notifications V2 to a server's webhook. The app buys from it (the example's storefront);
/// the tests play Apple's side with it: a refund, a subscription's expiry, and when a notification arrived.
///
/// The server must trust its root (`appStore.rootCertificates`) before it starts, and the dev App Store must know
/// the server's webhook when it starts: ``startWithServer(config:directory:certificates:subscriptions:)`` does it in
/// that order.
public final class DevAppStore: @unchecked Sendable {
    /// Its HTTP API's base URL (`POST /purchase`, `POST /transactions/{id}/…`, `GET /deliveries`).
    public let baseURL: URL
    /// The directory of its certificate authority (`root.der` is the root a server trusts).
    public let certificates: URL
    private let process: ChildProcess

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

    /// Starts `tally dev-appstore` on a free port with its CA in `certificates` (made there on first use), posting
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
            try TallyServer.binary, arguments, output: parent.appendingPathComponent("dev-appstore-\(UUID().uuidString.prefix(8)).out"))
        baseURL = try await process.awaitOutput("tally dev-appstore") { text in
            let prefix = "tally dev-appstore listening on "
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return nil }
            return line.dropFirst(prefix.count).split(separator: " ").first.flatMap { URL(string: String($0)) }
        }
    }

    /// Stops it (SIGTERM) and waits for it.
    public func stop() async throws {
        process.signal()
        _ = try await process.wait()
    }

    /// A `tally serve` that sells through a `tally dev-appstore`, both started and ready: `config` (whose
    /// `appStore.rootCertificates` names `<certificates>/root.der`, relative to the file) is copied into `directory`
    /// beside a new CA in `directory/<certificates>`; the CA is written first (a dev App Store started without a
    /// webhook and stopped), the server started on the copy (data in `directory/server`), then the dev App Store
    /// posting to the server's `/v1/webhooks/appstore`.
    public static func startWithServer(
        config: URL, directory: URL, certificates: String = ".dev-appstore", subscriptions: [String] = []
    ) async throws -> (server: TallyServer, appStore: DevAppStore) {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let copy = directory.appendingPathComponent(config.lastPathComponent)
        try? FileManager.default.removeItem(at: copy)
        try FileManager.default.copyItem(at: config, to: copy)
        let authority = directory.appendingPathComponent(certificates, isDirectory: true)
        try await DevAppStore(certificates: authority, webhook: nil).stop()
        let server = try await TallyServer(config: copy, dataDirectory: directory.appendingPathComponent("server"))
        let webhook = server.baseURL.appendingPathComponent("v1/webhooks/appstore")
        return (server, try await DevAppStore(certificates: authority, webhook: webhook, subscriptions: subscriptions))
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

    private func request<Answer: Decodable>(_ method: String, _ path: String, as _: Answer.Type) async throws -> Answer {
        var request = URLRequest(url: baseURL.appendingPathComponent(path))
        request.httpMethod = method
        if method == "POST" {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data("{}".utf8)
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        guard (response as? HTTPURLResponse)?.statusCode == 200 else {
            throw ExampleError("dev-appstore \(method) /\(path) answered \(String(decoding: data, as: UTF8.self))")
        }
        return try JSONDecoder().decode(Answer.self, from: data)
    }
}
