import Hummingbird
import Logging
import NIOCore
import TallyAPI

/// The context of every request: the caller's address, and once `AuthMiddleware` has run, who they are.
public struct TallyRequestContext: RequestContext {
    /// Hummingbird's per-request storage.
    public var coreContext: CoreRequestContextStorage
    /// The authenticated caller, set by ``AuthMiddleware`` from a verified access token.
    public var identity: Identity?
    /// The TCP peer (a proxy, when there is one: see ``ClientAddress``). Kept as is: parsed only by the
    /// routes that rate-limit by address.
    public let peer: SocketAddress?

    /// The peer's IP address.
    public var remoteIP: String { peer?.ipAddress ?? "unknown" }
    /// Where inner middleware notes what the access log line needs (set by ``AccessLogMiddleware``).
    var accessRecord: AccessRecord?

    /// Creates the context for a request arriving on a channel.
    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        peer = source.channel.remoteAddress
    }

    /// Request bodies are small JSON documents.
    public var maxUploadSize: Int { 64 * 1024 }
}

/// Who is calling, as proven by a verified access token.
public struct Identity: Sendable, Hashable {
    /// The account.
    public let userId: String
    /// The session the token belongs to.
    public let sessionId: String
}

/// The context of routes that need a signed-in user: it cannot be created without one,
/// so handlers never check whether the user is set.
public struct AuthenticatedContext: ChildRequestContext {
    /// Hummingbird's per-request storage.
    public var coreContext: CoreRequestContextStorage
    /// The authenticated caller.
    public let identity: Identity
    /// The TCP peer, as in ``TallyRequestContext/peer``.
    public let peer: SocketAddress?

    /// Fails with 401 when no verified identity is present.
    public init(context: TallyRequestContext) throws {
        guard let identity = context.identity else {
            throw APIError(.unauthorized, "A valid access token is required.")
        }
        self.coreContext = context.coreContext
        self.identity = identity
        self.peer = context.peer
    }

    /// Request bodies are small JSON documents.
    public var maxUploadSize: Int { 64 * 1024 }
}
