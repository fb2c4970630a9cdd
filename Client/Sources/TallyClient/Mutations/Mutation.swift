import Foundation
import TallyAPI

/// An optimistic change to one cached value, applied at once and removed when the mutation settles.
public struct OptimisticUpdate: Sendable {
    let key: String
    let apply: @Sendable (any Sendable) -> any Sendable

    /// Changes the value of `query` with `transform` while the mutation is in flight.
    public static func update<Value>(_ query: Query<Value>, _ transform: @escaping @Sendable (Value) -> Value) -> Self {
        OptimisticUpdate(key: query.key) { value in (value as? Value).map(transform) ?? value }
    }
}

/// An authoritative value a mutation's answer carries for a cached key.
public struct Confirmation: Sendable {
    let key: String
    let value: any Sendable
    let data: Data
    let isUserData: Bool

    /// The server says `query`'s value is now `value`.
    public static func of<Value>(_ query: Query<Value>, _ value: Value) -> Self? {
        guard let data = try? TallyJSON.encoder().encode(value) else { return nil }
        return Confirmation(key: query.key, value: value, data: data, isUserData: query.isUserData)
    }
}

/// A write to the server, made safe to retry by its Idempotency-Key (one per intent and request), with its
/// optimistic changes and the authoritative values its answer (or its refusal) carries.
public struct Mutation<Response: Decodable & Sendable>: Sendable {
    /// `POST`, `PATCH`, `DELETE`.
    public var method: String { didSet { ownKey = UUID().uuidString } }
    /// The path, e.g. `/v1/actions/reading`.
    public var path: String { didSet { ownKey = UUID().uuidString } }
    /// The route template for metrics, e.g. `POST /v1/actions/{name}`.
    public var operation: String
    /// The JSON body, if any.
    public var body: Data? { didSet { ownKey = UUID().uuidString } }
    /// What the user meant, in any words: a message id, a button press, the question asked. The same request
    /// (method, path and body) with the same intent is one write: calls while it is in flight share it (a double
    /// tap), and the server answers later ones with the first answer (a retry, a relaunch). The same intent on
    /// another request is another write. Nil: this request (and every copy of it) is an intent of its own.
    public var intent: String?
    /// The key without an intent: random, made with the request and again whenever its method, path or body
    /// change (so it, too, names one request; and sending it costs no hash).
    private var ownKey: String
    /// Mutations with the same scope run one after another; nil runs at once.
    public var scope: String?
    /// Changes shown while the mutation is in flight.
    public var optimistic: [OptimisticUpdate]
    /// The authoritative values in a successful answer.
    public var confirm: @Sendable (Response) -> [Confirmation]
    /// The authoritative values a refusal carries (a 402 carries the wallet and quotas).
    public var confirmOnError: @Sendable (ClientError) -> [Confirmation]
    /// Calls that wait for an AI model get the longer timeout.
    public var isLongRunning: Bool

    /// Creates a mutation; without an `intent` it is an intent of its own.
    public init(
        method: String, path: String, operation: String? = nil, body: Data? = nil, intent: String? = nil,
        scope: String? = nil, optimistic: [OptimisticUpdate] = [], isLongRunning: Bool = false,
        confirm: @escaping @Sendable (Response) -> [Confirmation] = { _ in [] },
        confirmOnError: @escaping @Sendable (ClientError) -> [Confirmation] = { _ in [] }
    ) {
        self.method = method
        self.path = path
        self.operation = operation ?? "\(method) \(path)"
        self.body = body
        self.intent = intent
        ownKey = UUID().uuidString
        self.scope = scope
        self.optimistic = optimistic
        self.isLongRunning = isLongRunning
        self.confirm = confirm
        self.confirmOnError = confirmOnError
    }

    /// The Idempotency-Key every attempt carries: derived from the whole request and the intent, so any
    /// string is a valid intent and an intent means one thing per request; without an intent, random.
    public var idempotencyKey: String {
        guard let intent else { return ownKey }
        return IdempotencyKey.derive(method: method, path: path, body: body, intent: intent)
    }
}
