import Foundation
import TallyStore
import TallyTestKit
import Testing

@testable import TallyPostgres

/// Merges across processes: two `PostgresStore`s on one database (``withTwoPostgresStores(sourceLocation:_:)``), each
/// with its own pool and caches, so only the database stands between them.
@Suite("Merges through two PostgreSQL stores", .timeLimit(.minutes(10)))
struct MergeTwoStoresTests {
    @Test("The same merge raced from two stores moves everything once; each store then sees the merged books")
    func sameMerge() async throws {
        try await withTwoPostgresStores { one, two in
            let clock = ManualClock(defaultStart)
            let (first, second) = (Fixture(store: one, kind: .postgres, clock: clock), Fixture(store: two, kind: .postgres, clock: clock))
            let example = try await MergeExample.make(first)
            // Both stores have the accounts in their caches, as after serving them.
            for f in [first, second] {
                _ = try await f.store.accountState(userId: example.guest, now: f.now)
                _ = try await f.store.accountState(userId: example.account, now: f.now)
            }
            let outcomes = try await withThrowingTaskGroup(of: MergeOutcome.self) { group in
                for index in 0..<10 {
                    let f = index.isMultiple(of: 2) ? first : second
                    group.addTask { try await f.store.merge(guestId: example.guest, into: example.account, now: f.now) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes.filter { !$0.replayed }.count == 1)
            #expect(Set(outcomes.map(\.summary)).count == 1)
            // The process that did not merge learns of the guest's revoked sessions from the revocation feed (or the
            // server's announcement of the summary's sessions).
            for store in [one, two] { try await store.pollRevocations() }
            try await example.expectMerged(outcomes[0].summary, first)
            try await example.expectMerged(outcomes[0].summary, second)
            // A command planned from the other store's cache of the guest is refused, not applied to the guest.
            await expectStoreError(.userNotFound, .postgres) { try await second.run(.grant(userId: example.guest, amount: 1, reason: "late")) }
        }
    }

    @Test("A merge racing debits, holds and document writes from both stores loses and doubles nothing")
    func raceWithWrites() async throws {
        try await withTwoPostgresStores { one, two in
            let clock = ManualClock(defaultStart)
            try await MergeConformanceTests.raceWithWrites(
                Fixture(store: one, kind: .postgres, clock: clock), Fixture(store: two, kind: .postgres, clock: clock))
        }
    }

    @Test("A merge racing App Store facts naming the guest, from the other store: each credited once, all of it on the account")
    func raceWithPurchases() async throws {
        try await withTwoPostgresStores { one, two in
            let clock = ManualClock(defaultStart)
            let (first, second) = (Fixture(store: one, kind: .postgres, clock: clock), Fixture(store: two, kind: .postgres, clock: clock))
            let guest = try await first.newUser(tokens: 5)
            let account = try await first.newUser()
            _ = try await first.store.linkCredentials(userId: account, email: randomId() + "@example.com", passwordHash: "hash")
            let bought = (0..<8).map { _ in AppStoreFacts.consumable(tokens: 10, for: guest, purchased: first.now) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, transaction) in bought.enumerated() {
                    group.addTask {
                        if index.isMultiple(of: 2) {
                            try await second.deliver(AppStoreFacts.notification(.oneTimeCharge, transaction, signed: second.now))
                        } else {
                            // Before the merge the guest it names is credited, and the account refused as the submitter.
                            do {
                                try await second.redeem(transaction, by: account)
                            } catch let error as StoreError where error.code == .purchaseClaimed {}
                        }
                    }
                    if index == 3 { group.addTask { _ = try await first.store.merge(guestId: guest, into: account, now: first.now) } }
                }
                try await group.waitForAll()
            }
            #expect(try await first.balance(account) == 85)
            #expect(try await first.balance(guest) == 0)
            for transaction in bought {
                let owned = try await first.allPurchases(account, pageSize: 20).map(\.transactionId)
                #expect(owned.contains(transaction.transactionId), "\(transaction.transactionId) not the account's")
            }
            #expect(try await first.allPurchases(guest).isEmpty)
            try await first.checkInvariants([guest, account])
        }
    }
}
