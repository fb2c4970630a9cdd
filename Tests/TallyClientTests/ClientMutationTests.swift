import Foundation
import TallyAPI
@testable import TallyClient
import TallyTestKit
import Testing

/// Optimistic mutations against the real server: reconcile, roll back exactly, retry safely, never double.
@Suite("Client mutations", .timeLimit(.minutes(1)))
struct ClientMutationTests {
    @Test("An action shows its estimate at once and reconciles with the server's answer, with no second request")
    func optimisticThenConfirmed() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, transport) = try await server.readyClient(tokens: 10, clock: clock)
            transport.enqueue([.latency(1)], forPathPrefix: "/v1/actions/")
            let walletReads = transport.count(path: "/v1/wallet")
            let action = Task { try await client.perform("ai.query") }
            try await clock.waitForSleepers(1)
            let optimistic = client.state(client.walletQuery)
            #expect(optimistic.value?.balance == 7 && optimistic.pendingMutations == 1)
            clock.advance(by: 1)
            let result = try await action.value
            let confirmed = client.state(client.walletQuery)
            #expect(confirmed.value == result.wallet && confirmed.pendingMutations == 0 && result.wallet.balance == 7)
            #expect(transport.count(path: "/v1/wallet") == walletReads)
        }
    }

    @Test("Free quota uses are estimated on the quota, not the wallet")
    func quotaEstimate() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, transport) = try await server.readyClient(tokens: 10, clock: clock)
            transport.enqueue([.latency(1)], forPathPrefix: "/v1/actions/")
            let action = Task { try await client.perform("reading") }
            try await clock.waitForSleepers(1)
            #expect(client.value(client.quotasQuery)?.items.first?.used == 1)
            #expect(client.value(client.walletQuery)?.balance == 10)
            clock.advance(by: 1)
            #expect(try await action.value.paidWith == .quota)
            #expect(client.value(client.quotasQuery)?.items.first?.used == 1)
        }
    }

    @Test("Three concurrent actions, one refused: never a lost or doubled deduction, ending at the server's balance")
    func threeActionsOneFails() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, transport) = try await server.readyClient(tokens: 7, clock: clock)
            var observed: [Int64] = []
            let stream = client.observe(client.walletQuery)
            let watcher = Task {
                var balances: [Int64] = []
                for await state in stream {
                    if let balance = state.value?.balance { balances.append(balance) }
                    if state.pendingMutations == 0 && balances.count > 1 && balance(balances) == 1 { break }
                }
                return balances
            }
            transport.enqueue([.latency(1), .latency(2), .latency(3)], forPathPrefix: "/v1/actions/")
            let actions = (0..<3).map { _ in Task { try await client.perform("ai.query") } }
            try await clock.waitForSleepers(3)
            // Two estimates fit in 7 tokens; the third would overdraw, so it is not shown.
            #expect(client.value(client.walletQuery)?.balance == 1)
            for _ in 0..<3 { clock.advance(by: 1) }
            var outcomes: [String] = []
            for action in actions {
                do { outcomes.append("\(try await action.value.wallet.balance)") } catch let error as ClientError {
                    if error.code == .insufficientTokens { outcomes.append("402:\(error.wallet?.balance ?? -1)") }
                }
            }
            #expect(outcomes.sorted() == ["1", "4", "402:1"])
            observed = await watcher.value
            // Every state shown is the last confirmed balance minus the pending estimates.
            #expect(Set(observed).isSubset(of: [7, 4, 1]) && observed.allSatisfy { $0 >= 0 })
            #expect(observed.last == 1)
            let shown = client.state(client.walletQuery)
            #expect(shown.value?.balance == 1 && shown.pendingMutations == 0)
            #expect(try await client.fetch(client.walletQuery, forceRefresh: true).balance == 1)
        }
    }

    @Test("A dropped response is retried with the same Idempotency-Key and charged once")
    func retryAfterDroppedResponse() async throws {
        try await TallyTestServer.with { server in
            let (client, transport) = try await server.readyClient(tokens: 10)
            transport.enqueue([.dropResponse], forPathPrefix: "/v1/actions/")
            let result = try await client.perform("ai.query")
            #expect(result.wallet.balance == 7)
            let sent = transport.requests.filter { $0.path == "/v1/actions/ai.query" }
            #expect(sent.count == 2 && Set(sent.map { $0.headers["Idempotency-Key"] }).count == 1)
            let entries = try await client.fetch(Query<Page<LedgerEntry>>(key: "entries", path: "/v1/wallet/entries?limit=100"))
            #expect(entries.items.filter { $0.kind == "debit" }.count == 1)
            #expect(try await client.fetch(client.walletQuery, forceRefresh: true).balance == 7)
        }
    }

    @Test("A double tap (two calls with one intent) is one write")
    func doubleTap() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, transport) = try await server.readyClient(tokens: 10, clock: clock)
            transport.enqueue([.latency(1)], forPathPrefix: "/v1/actions/")
            let first = Task { try await client.perform("ai.query", intent: "message-1") }
            try await clock.waitForSleepers(1)
            let second = Task { try await client.perform("ai.query", intent: "message-1") }
            let key = IdempotencyKey.derive(method: "POST", path: "/v1/actions/ai.query", body: nil, intent: "message-1")
            try await waitUntil { client.writes.waiterCount(for: key) >= 2 }
            #expect(client.value(client.walletQuery)?.balance == 7)  // one estimate, not two
            clock.advance(by: 1)
            let (a, b) = try await (first.value, second.value)
            #expect(a == b && a.wallet.balance == 7)
            #expect(transport.count(path: "/v1/actions/ai.query") == 1)
            // The same intent later is a replay, not a second charge.
            #expect(try await client.perform("ai.query", intent: "message-1").wallet.balance == 7)
        }
    }

    @Test("Mutations in one scope run in order; other scopes do not wait")
    func scopes() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, transport) = try await server.readyClient(tokens: 10, clock: clock)
            transport.enqueue([.latency(1)], forPathPrefix: "/v1/actions/")
            func action(_ scope: String) -> Mutation<ActionResult> {
                Mutation(method: "POST", path: "/v1/actions/ai.query", scope: scope)
            }
            let first = Task { try await client.mutate(action("habit-1")) }
            try await clock.waitForSleepers(1)
            let second = Task { try await client.mutate(action("habit-1")) }
            let other = try await client.mutate(action("habit-2"))  // not blocked by habit-1
            #expect(other.wallet.balance == 7)
            #expect(transport.count(path: "/v1/actions/ai.query") == 2)  // habit-1's second waits for its first
            clock.advance(by: 1)
            _ = try await (first.value, second.value)
            #expect(transport.count(path: "/v1/actions/ai.query") == 3)
        }
    }

    @Test("A failed mutation rolls back to exactly the prior state")
    func exactRollback() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, transport) = try await server.readyClient(tokens: 10, clock: clock, retry: RetryPolicy(maxAttempts: 1))
            let before = (client.state(client.walletQuery), client.state(client.quotasQuery))
            var states = client.observe(client.walletQuery).makeAsyncIterator()
            _ = await states.next()
            transport.enqueue([.status(500, retryAfter: nil)], forPathPrefix: "/v1/actions/")
            await #expect(throws: ClientError.self) { try await client.perform("ai.query") }
            let optimistic = await states.next()
            #expect(optimistic?.value?.balance == 7 && optimistic?.pendingMutations == 1)
            let rolledBack = await states.next()
            #expect(rolledBack?.value == before.0.value && rolledBack?.pendingMutations == 0)
            let after = (client.state(client.walletQuery), client.state(client.quotasQuery))
            #expect(after.0.value == before.0.value && after.0.confirmedAt == before.0.confirmedAt && after.0.pendingMutations == 0)
            #expect(after.1.value == before.1.value && after.1.confirmedAt == before.1.confirmedAt)
        }
    }

    @Test("402 rolls back and carries the server's wallet and quotas for a paywall")
    func paywall() async throws {
        try await TallyTestServer.with { server in
            let (client, _) = try await server.readyClient(tokens: 2)
            do {
                try await client.perform("ai.query")
                Issue.record("expected insufficientTokens")
            } catch let error as ClientError where error.code == .insufficientTokens {
                #expect(error.wallet?.balance == 2 && !error.quotas.isEmpty)
            }
            #expect(client.value(client.walletQuery)?.balance == 2)
            #expect(client.state(client.walletQuery).pendingMutations == 0)
        }
    }

    @Test("Two actions answered out of order leave the newest wallet and quotas shown")
    func answersOutOfOrder() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, transport) = try await server.readyClient(tokens: 10, clock: clock)
            // The AI query is charged first but its answer (no reading used yet) arrives last.
            transport.enqueue([.delayResponse(5), .delayResponse(2)], forPathPrefix: "/v1/actions/")
            let first = Task { try await client.perform("ai.query") }
            try await clock.waitForSleepers(1)
            let second = Task { try await client.perform("reading") }
            try await clock.waitForSleepers(2)
            clock.advance(by: 2)
            #expect(try await second.value.quotas.first?.used == 1)
            clock.advance(by: 3)
            #expect(try await first.value.quotas.first?.used == 0)
            #expect(client.value(client.quotasQuery)?.items.first?.used == 1)
            #expect(client.value(client.walletQuery)?.balance == 7)
            #expect(client.state(client.quotasQuery).pendingMutations == 0)
            #expect(try await client.fetch(client.quotasQuery, forceRefresh: true).items.first?.used == 1)
        }
    }

    @Test("A refetch answered before a mutation but delivered after it neither resurrects the old value nor wipes the optimistic layer")
    func racingRefetch() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, transport) = try await server.readyClient(tokens: 10, clock: clock)
            let wallet = client.walletQuery
            let quotas = client.quotasQuery
            func readingsUsed() -> Int? { client.value(quotas)?.items.first?.used }

            // 1. The refetches reach the server first (balance 10, no reading used); their answers are held back.
            transport.enqueue([.delayResponse(2)], forPathPrefix: "/v1/wallet")
            transport.enqueue([.delayResponse(2)], forPathPrefix: "/v1/quotas")
            let walletRefetch = Task { try await client.fetch(wallet, forceRefresh: true) }
            let quotasRefetch = Task { try await client.fetch(quotas, forceRefresh: true) }
            try await clock.waitForSleepers(2)
            // Then one action of each kind is charged and confirmed, and one more of each is still in flight.
            #expect(try await client.perform("reading").paidWith == .quota)
            #expect(try await client.perform("ai.query").wallet.balance == 7)
            transport.enqueue([.latency(5), .latency(5)], forPathPrefix: "/v1/actions/")
            let pending = [Task { try await client.perform("reading") }, Task { try await client.perform("ai.query") }]
            try await clock.waitForSleepers(4)
            #expect(readingsUsed() == 2 && client.value(wallet)?.balance == 4)
            // The pre-action answers arrive: the optimistic layers stay on the newest confirmed values.
            clock.advance(by: 2)
            _ = try await (walletRefetch.value, quotasRefetch.value)
            #expect(readingsUsed() == 2 && client.state(quotas).pendingMutations == 1)
            #expect(client.value(wallet)?.balance == 4 && client.state(wallet).pendingMutations == 1)
            clock.advance(by: 3)
            for action in pending { _ = try await action.value }
            #expect(readingsUsed() == 2 && client.value(wallet)?.balance == 4)

            // 2. With nothing in flight: a quota answer sent before a reading, delivered after its confirmation,
            //    is older than the confirmed value and is dropped (quotas have no version to order them by).
            transport.enqueue([.delayResponse(2)], forPathPrefix: "/v1/quotas")
            let staleQuotas = Task { try await client.fetch(quotas, forceRefresh: true) }
            try await clock.waitForSleepers(1)
            #expect(try await client.perform("reading").quotas.first?.used == 3)
            clock.advance(by: 2)
            #expect(try await staleQuotas.value.items.first?.used == 3)
            #expect(readingsUsed() == 3 && client.state(quotas).pendingMutations == 0)

            // The server agrees with what is shown.
            #expect(try await client.fetch(quotas, forceRefresh: true).items.first?.used == 3)
            #expect(try await client.fetch(wallet, forceRefresh: true).balance == 4)
        }
    }
}

private func balance(_ balances: [Int64]) -> Int64? { balances.last }
