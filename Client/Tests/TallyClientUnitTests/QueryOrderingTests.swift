import Foundation
import TallyAPI
import Testing

@testable import TallyClient

/// Which confirmed value may replace the shown one, without I/O.
@Suite(.timeLimit(.minutes(1))) struct QueryOrderingTests {
    static let midnight = Date(timeIntervalSince1970: 1_800_000_000)

    static func quotas(_ used: [String: Int], resetsAt: Date = midnight) -> QuotaList {
        QuotaList(items: used.sorted { $0.key < $1.key }.map { name, used in
            Quota(name: name, limit: 3, used: used, resetsAt: resetsAt, unlimited: false)
        })
    }

    @Test func quotasNeverGoBackWithinAWindow() {
        let query = Query<QuotaList>.quotas()
        let two = Self.quotas(["readings": 2, "chats": 0])
        #expect(query.supersedes(Self.quotas(["readings": 2, "chats": 1]), two))
        #expect(query.supersedes(two, two), "an equal answer (e.g. premium switched on) still replaces")
        #expect(!query.supersedes(Self.quotas(["readings": 1, "chats": 1]), two), "one quota behind is enough to refuse")
    }

    @Test func aNewWindowReplacesAndAnOldOneDoesNot() {
        let query = Query<QuotaList>.quotas()
        let today = Self.quotas(["readings": 3])
        let tomorrow = Self.quotas(["readings": 0], resetsAt: Self.midnight.addingTimeInterval(86_400))
        #expect(query.supersedes(tomorrow, today))
        #expect(!query.supersedes(today, tomorrow))
    }

    @Test func quotasAddedOrRemovedByTheServerDoNotBlock() {
        let query = Query<QuotaList>.quotas()
        #expect(query.supersedes(Self.quotas(["new": 0]), Self.quotas(["readings": 3])))
    }

    @Test func walletVersionsNeverGoBack() {
        let query = Query<Wallet>.wallet()
        let wallet = { (version: Int64) in Wallet(balance: 10, held: 0, version: version) }
        #expect(query.supersedes(wallet(5), wallet(4)))
        #expect(query.supersedes(wallet(5), wallet(5)))
        #expect(!query.supersedes(wallet(4), wallet(5)))
    }
}
