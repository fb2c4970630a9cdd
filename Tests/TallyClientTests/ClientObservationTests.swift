import Foundation
import TallyAPI
@testable import TallyClient
import TallyTestKit
import Testing

/// What observers are sent, against the real server: changes only, and errors that end when the server answers.
@Suite("Client observation", .timeLimit(.minutes(1)))
struct ClientObservationTests {
    @Test("Observers are sent changes only: held confirmations and unchanged values confirmed again repeat nothing")
    func changesOnly() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, transport) = try await server.readyClient(tokens: 20, clock: clock)
            var wallets = client.observe(client.walletQuery).makeAsyncIterator()
            var quotas = client.observe(client.quotasQuery).makeAsyncIterator()
            // Three actions answered at the same moment: the first two confirmations are held (nothing shown
            // changes), and an AI query confirms the quotas exactly as they were.
            transport.enqueue(Array(repeating: .latency(1), count: 3), forPathPrefix: "/v1/actions/")
            let actions = (0..<3).map { _ in Task { try await client.perform("ai.query") } }
            try await clock.waitForSleepers(3)
            clock.advance(by: 1)
            for action in actions { _ = try await action.value }
            let endWallet = Wallet(balance: -1, held: 0, version: Int64.max)
            let endQuotas = QuotaList(items: [])
            client.setValue(endWallet, for: client.walletQuery)
            client.setValue(endQuotas, for: client.quotasQuery)

            let walletStates = await collect(&wallets, through: { $0.value == endWallet })
            #expect(walletStates.map { $0.value?.balance } == [20, 17, 14, 11, 11, -1])
            #expect(walletStates.map(\.pendingMutations) == [0, 1, 2, 3, 0, 0])
            let quotaStates = await collect(&quotas, through: { $0.value == endQuotas })
            #expect(quotaStates.count == 3)  // as fetched, confirmed a moment later, the marker
            #expect(zip(walletStates, walletStates.dropFirst()).allSatisfy { !$0.looksLike($1) })
            #expect(zip(quotaStates, quotaStates.dropFirst()).allSatisfy { !$0.looksLike($1) })
        }
    }

    @Test("A value the server confirms clears the error an offline fetch left, for the observers too")
    func confirmationClearsTheError() async throws {
        try await TallyTestServer.with { server in
            let (client, transport) = try await server.readyClient(tokens: 10, retry: .none)
            var states = client.observe(client.walletQuery).makeAsyncIterator()
            transport.enqueue([.offline], forPathPrefix: "/v1/wallet")
            let error = await #expect(throws: ClientError.self) { try await client.fetch(client.walletQuery, forceRefresh: true) }
            #expect(error?.code == .offline)
            #expect(client.state(client.walletQuery).error?.code == .offline)
            #expect(try await client.perform("ai.query").wallet.balance == 7)
            #expect(client.state(client.walletQuery).error == nil)  // before the fix: still offline
            let seen = await collect(&states, through: { $0.value?.balance == 7 && $0.pendingMutations == 0 })
            #expect(seen.contains { $0.error?.code == .offline } && seen.last?.error == nil)
        }
    }
}
