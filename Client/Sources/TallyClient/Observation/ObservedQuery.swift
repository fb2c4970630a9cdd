#if canImport(Observation)
import Observation

/// A query's state for SwiftUI: `@Observable` (iOS 17 and later, as Observation requires), updated on the main
/// actor, and only when the state changed.
///
/// Make it in the view's initializer, where the client is at hand (a property initializer cannot read it):
///
/// ```swift
/// struct WalletView: View {
///     @State private var wallet: ObservedQuery<Wallet>
///
///     init(client: Client) {
///         _wallet = State(initialValue: ObservedQuery(client.walletQuery, client: client))
///     }
///
///     var body: some View {
///         Text(wallet.state.value.map { "\($0.available) tokens" } ?? "…")
///             .task { await wallet.run() }
///             .refreshable { await wallet.refresh() }
///     }
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
    /// What tells the state shown from the next one, without comparing values.
    @ObservationIgnored private var shown: QueryCache.Signature

    /// Reads the cached state at once (a cache read: cheap enough for a view's initializer, which SwiftUI may
    /// call often); call ``run()`` (from SwiftUI's `.task`) to follow changes.
    public init(_ query: Query<Value>, client: Client) {
        self.query = query
        self.client = client
        let (initial, signature) = client.signedState(query)
        state = initial
        shown = signature
    }

    /// Follows the query until the calling task is cancelled (SwiftUI cancels `.task` when the view goes away).
    /// A state equal to the one shown is not assigned, so SwiftUI redraws only on changes.
    public func run() async {
        for await (next, signature) in client.signedStates(query) where signature != shown {
            shown = signature
            state = next
        }
    }

    /// Fetches the query from the server now, whatever its freshness (pull to refresh). The answer, or the
    /// failure in ``QueryState/error``, reaches ``state`` through ``run()``.
    public func refresh() async {
        _ = try? await client.fetch(query, forceRefresh: true)
    }
}
#endif
