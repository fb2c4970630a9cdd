import Foundation

/// How long an attempt of each kind of request may take. Defaults follow the field notes:
/// reads answer from one indexed row, writes take a transaction, AI calls wait for a model.
public struct Timeouts: Sendable, Hashable {
    /// Balance, quota and profile reads.
    public var read: Duration
    /// Mutations: actions, holds, sign-in.
    public var write: Duration
    /// Calls that wait for an AI model behind the server.
    public var ai: Duration

    /// Creates timeouts; the defaults are 8 s, 30 s and 60 s.
    public init(read: Duration = .seconds(8), write: Duration = .seconds(30), ai: Duration = .seconds(60)) {
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

    func timeout(_ timeouts: Timeouts) -> Duration {
        switch kind {
        case .read: timeouts.read
        case .write: timeouts.write
        case .ai: timeouts.ai
        }
    }
}
