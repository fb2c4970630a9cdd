/// How long a connection may take to send a request or stay idle, and how many may be open.
///
/// The defaults suit a server behind a load balancer: the idle timeout outlasts the usual balancer
/// keep-alive (60 s), so the balancer closes idle connections first and never sends on one being closed.
public struct ConnectionSettings: Sendable, Hashable {
    /// A keep-alive connection with no request for this long is closed. A connection whose response is still
    /// being written (an event stream, `GET /v1/sync/events`) is not idle, however quiet.
    public var idleTimeout: Duration = .seconds(75)
    /// A request head (request line and header fields) must be complete this long after the connection
    /// opened, or after its first byte on a kept-alive connection: a slow trickle of header bytes
    /// (slowloris) is cut off here.
    public var headerTimeout: Duration = .seconds(10)
    /// A request body must be complete this long after its head; and a connection whose answer waits unsent
    /// (the client does not read it) for this long is closed, so a client cannot pin the answer's memory.
    public var requestTimeout: Duration = .seconds(30)
    /// Connections open at once on the public listener; beyond it new ones are refused with a 503.
    /// Nil: derived from the open-file limit (``ConnectionSettings/derivedMaximum(socketBudget:)``).
    public var maxConnections: Int?
    /// Connections open at once from one client address on the public listener (0: no per-address cap).
    /// Behind a load balancer every connection comes from the balancer's few addresses: raise it, or use 0.
    public var maxConnectionsPerIP = 256

    /// Connections open at once on the admin listener (operators and the app's backend only).
    public static let adminMaxConnections = 64
    /// Sockets the admin listener may hold: its cap and room for refusing more.
    static let adminSocketBudget = adminMaxConnections + 16
    /// Descriptors kept for everything but the listeners' sockets: database files, logs, event loops.
    static let reservedFiles = 64

    /// The defaults.
    public init() {}

    /// Sockets the public listener may hold at once (admitted connections and those being refused):
    /// the open-file limit less the descriptors of the database pool, the admin listener and files; at
    /// least 32. The listener stops accepting there, so `accept` never fails for want of descriptors.
    public static func socketBudget(openFileLimit: Int, databaseConnections: Int) -> Int {
        max(32, openFileLimit - databaseConnections - adminSocketBudget - reservedFiles)
    }

    /// The public listener's default cap: its socket budget less room (an eighth, at least 16) for
    /// connections being answered with a 503.
    public static func derivedMaximum(socketBudget: Int) -> Int {
        socketBudget - max(16, socketBudget / 8)
    }
}
