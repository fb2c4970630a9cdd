import Foundation
import TallyAPI
import TallyClient
import Testing

#if canImport(SwiftUI)
import SwiftUI

// ObservedQuery's doc comment, as written there (Apple platforms only: SwiftUI does not exist on Linux).
@available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
struct WalletView: View {
    @State private var wallet: ObservedQuery<Wallet>

    init(client: Client) {
        _wallet = State(initialValue: ObservedQuery(client.walletQuery, client: client))
    }

    var body: some View {
        Text(wallet.state.value.map { "\($0.available) tokens" } ?? "…")
            .task { await wallet.run() }
            .refreshable { await wallet.refresh() }
    }
}

// ObservedDocuments's doc comment, as written there.
typealias HabitLog = ReadmeSamples.HabitLog

@available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
struct MonthView: View {
    @State private var logs: ObservedDocuments<HabitLog>

    init(client: Client) {
        let collection = client.collection("habit_logs", of: HabitLog.self)
        _logs = State(initialValue: ObservedDocuments(collection, from: "2026-11-01", to: "2026-12-01"))
    }

    var body: some View {
        List(logs.documents, id: \.id) { Text($0.value.habit) }.task { await logs.run() }
    }
}
#endif

/// The samples of the query cache's doc comments and README section, compiled everywhere and run where they
/// need no server; what is SwiftUI in them is compiled on Apple platforms above.
@Suite("Doc samples: cache and observation", .timeLimit(.minutes(1)))
struct CacheDocSamplesTests {
    /// An app's client for a server that is not there.
    private static func offlineClient() -> Client {
        var configuration = ClientConfiguration(baseURL: URL(string: "http://127.0.0.1:9")!, secureStore: MemorySecureStore())
        configuration.retry = .none
        return Client(configuration: configuration)
    }

    @available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
    @MainActor
    @Test("ObservedQuery's sample, without the view: made from the client, shows the cache, refreshes, follows")
    func observedQuery() async throws {
        let client = Self.offlineClient()
        client.setValue(Wallet(balance: 12, held: 0, version: 1), for: client.walletQuery)
        let wallet = ObservedQuery(client.walletQuery, client: client)
        #expect((wallet.state.value.map { "\($0.available) tokens" } ?? "…") == "12 tokens")
        let following = Task { await wallet.run() }
        await wallet.refresh()  // no server: the failure lands in the state
        try await waitUntil { wallet.state.error != nil }
        #expect(wallet.state.value?.available == 12)
        following.cancel()
    }

    @Test("README: show a grant made by the app's backend at once")
    func grantMadeElsewhere() {
        let tally = Self.offlineClient()
        let walletFromBackend = Wallet(balance: 40, held: 0, version: 9)
        // README sample begins
        // The app's backend credited a purchase: refetch the wallet now, before the stream's event (or in the background).
        tally.invalidate(key: tally.walletQuery.key)
        // Or, when the backend's answer carries the wallet, show it without a request:
        tally.setValue(walletFromBackend, for: tally.walletQuery)
        // README sample ends
        #expect(tally.value(tally.walletQuery) == walletFromBackend && !tally.state(tally.walletQuery).isStale)
    }
}
