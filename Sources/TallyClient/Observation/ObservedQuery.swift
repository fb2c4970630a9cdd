#if canImport(Observation)
import Observation

/// A query's state for SwiftUI: `@Observable` (iOS 17 and later, as Observation requires), updated on the main actor.
///
/// ```swift
/// @State var wallet = ObservedQuery(client.walletQuery, client: client)
/// var body: some View {
///     Text(wallet.state.value.map { "\($0.available) tokens" } ?? "…")
///         .task { await wallet.run() }
/// }
/// ```
@available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
@MainActor
@Observable
public final class ObservedQuery<Value: Codable & Sendable> {
    /// The latest state; its first value is the cached one, available synchronously for first paint.
    public private(set) var state: QueryState<Value>
    @ObservationIgnored private let query: Query<Value>
    @ObservationIgnored private let client: Client

    /// Reads the cached state at once; call ``run()`` (from SwiftUI's `.task`) to follow changes.
    public init(_ query: Query<Value>, client: Client) {
        self.query = query
        self.client = client
        state = client.state(query)
    }

    /// Follows the query until the calling task is cancelled (SwiftUI cancels `.task` when the view goes away).
    public func run() async {
        for await next in client.observe(query) { state = next }
    }
}
#endif
