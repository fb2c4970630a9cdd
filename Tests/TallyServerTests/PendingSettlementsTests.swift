import Foundation
import TallyAPI
@testable import TallyServer
import TallyStore
import Testing

/// What a settlement retried after an outage does to each state the database can hold when it returns, on both
/// stores: the hold open, captured by an attempt whose answer was lost, expired and swept, expired and not yet swept,
/// or the wallet spent meanwhile. (The outage itself, through a cut proxy: `DatabaseOutageTests`.)
@Suite("AI settlements retried after an outage", .timeLimit(.minutes(10)))
struct PendingSettlementsTests {
    /// A capture of `amount` on `holdId`, as the gateway would have settled it.
    static func capture(_ user: TestUser, _ holdId: String, _ amount: Int64) throws -> Settlement {
        let charge = ChatCharge(promptTokens: 12, completionTokens: 6, amount: amount, fromUsage: true)
        return Settlement(HeldCall(userId: user.userId, holdId: holdId, chat: try AIGatewayTests.bound("Tell me")), charge: charge)
    }

    @Test("A retried capture lands once in every state the hold can be found in", arguments: StoreKind.allCases)
    func everyStateOnce(_ kind: StoreKind) async throws {
        try await LiveServer.with(kind) { server in
            let api = server.connection()
            let store = server.services.store
            let settlements = PendingSettlements(store: store, clock: server.clock, notifier: server.services.notifier)
            let user = try await api.newGuest(granted: 100)
            func hold(_ amount: Int64, for seconds: TimeInterval = 60) async throws -> String {
                let id = UUID().uuidString.lowercased()
                _ = try await store.execute(
                    .createHold(userId: user.userId, holdId: id, amount: amount, expiresAt: server.clock.now.addingTimeInterval(seconds), note: nil),
                    idempotency: nil, now: server.clock.now) { _ in StoredResponse(status: 201, body: []) }
                return id
            }
            func charges(_ holdId: String) async throws -> [Int64] {
                try await api.allEntries(user).filter { ($0.kind == "capture" || $0.kind == "debit") && $0.reason?.hasPrefix(holdId) == true }
                    .map(\.amount)
            }

            // Open: captured; a second attempt (its first answer lost) finds it captured and adds nothing.
            let open = try await hold(20)
            #expect(await settlements.attempt(try Self.capture(user, open, 7)))
            #expect(await settlements.attempt(try Self.capture(user, open, 7)))
            #expect(try await charges(open) == [-7])

            // Expired and swept by housekeeping: charged as a debit, once however often retried.
            let swept = try await hold(20, for: 10)
            server.clock.advance(by: 11)
            try await server.sweep()
            #expect(await settlements.attempt(try Self.capture(user, swept, 9)))
            #expect(await settlements.attempt(try Self.capture(user, swept, 9)))
            #expect(try await charges(swept) == [-9])

            // Expired, not yet swept: the debit's transaction releases it first.
            let unswept = try await hold(20, for: 10)
            server.clock.advance(by: 11)
            #expect(await settlements.attempt(try Self.capture(user, unswept, 5)))
            let kinds = try await api.allEntries(user).filter { $0.reason?.hasPrefix(unswept) == true }.map(\.kind)
            #expect(kinds == ["debit", "expire", "hold"], "\(kinds)")

            // A release that finds the hold expired is done: its expiry releases it whole.
            let released = try await hold(20, for: 10)
            server.clock.advance(by: 11)
            let release = Settlement(HeldCall(userId: user.userId, holdId: released, chat: try AIGatewayTests.bound("x")), charge: nil, why: "x")
            #expect(await settlements.attempt(release))
            #expect(try await api.wallet(user).held == 0)  // the read releases the expired hold whole
            #expect(try await api.allEntries(user).filter { $0.reason?.hasPrefix(released) == true }.map(\.kind) == ["expire", "hold"])

            // Expired while the user spent what it held: what is available, never below zero.
            let spent = try await hold(70, for: 10)
            server.clock.advance(by: 11)
            try await server.sweep()
            let balance = try await api.wallet(user).balance
            _ = try await store.execute(
                .performAction(userId: user.userId, action: ActionSpec(name: "spend", tokens: balance - 4), quotaLimit: nil), idempotency: nil,
                now: server.clock.now) { _ in StoredResponse(status: 200, body: []) }
            #expect(await settlements.attempt(try Self.capture(user, spent, 30)))
            #expect(try await charges(spent) == [-4])
            #expect(try await api.wallet(user).balance == 0)
            #expect(settlements.count == 0)
            try await api.expectBooksBalance(user)
            await api.close()
        }
    }
}
