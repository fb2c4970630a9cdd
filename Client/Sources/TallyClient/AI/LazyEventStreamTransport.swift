import Foundation

/// The streaming transport of a client's AI streams: the configuration's (tests inject one), else one
/// ``URLSessionEventStreamTransport`` made on first use and kept for the client's life, so that every stream
/// shares its session (and its connections) instead of opening a session of its own.
final class LazyEventStreamTransport: Sendable {
    private let made = Locked<(any EventStreamTransport)?>(nil)

    /// Creates an empty slot: nothing is made until a stream asks.
    init() {}

    /// The transport `configuration` names, or the one made for its server (made now if this is the first ask).
    func transport(_ configuration: ClientConfiguration) -> any EventStreamTransport {
        if let configured = configuration.eventStreamTransport { return configured }
        return made.withLock { made in
            if let made { return made }
            let transport = URLSessionEventStreamTransport(baseURL: configuration.baseURL)
            made = transport
            return transport
        }
    }
}
