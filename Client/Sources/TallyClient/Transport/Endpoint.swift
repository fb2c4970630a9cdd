import Foundation

/// How long an attempt of each kind of request may take. Defaults follow the field notes:
/// reads answer from one indexed row, writes take a transaction, AI calls wait for a model.
public struct Timeouts: Sendable, Hashable {
    /// Balance, quota and profile reads, in seconds.
    public var read: TimeInterval
    /// Mutations: actions, holds, sign-in, in seconds.
    public var write: TimeInterval
    /// Calls that wait for an AI model behind the server, in seconds.
    public var ai: TimeInterval

    /// Creates timeouts; the defaults are 8 s, 30 s and 60 s.
    public init(read: TimeInterval = 8, write: TimeInterval = 30, ai: TimeInterval = 60) {
        self.read = read
        self.write = write
        self.ai = ai
    }
}

/// One request the SDK sends: what it is (for metrics, by route template), where, and how long it may take.
struct Endpoint: Sendable {
    enum Kind: Sendable { case read, write, ai }

    var method: String
    var path: String
    /// The route template, e.g. `POST /v1/actions/{name}`: metrics never carry ids.
    var operation: String
    var kind: Kind
    var authenticated = true

    static func get(_ path: String, operation: String? = nil) -> Endpoint {
        Endpoint(method: "GET", path: path, operation: operation ?? "GET \(path)", kind: .read)
    }

    static func post(_ path: String, operation: String? = nil, kind: Kind = .write, authenticated: Bool = true) -> Endpoint {
        Endpoint(method: "POST", path: path, operation: operation ?? "POST \(path)", kind: kind, authenticated: authenticated)
    }

    func timeout(_ timeouts: Timeouts) -> TimeInterval {
        switch kind {
        case .read: timeouts.read
        case .write: timeouts.write
        case .ai: timeouts.ai
        }
    }
}
