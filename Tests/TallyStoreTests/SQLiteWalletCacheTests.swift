import Foundation
import GRDB
import Testing
import TallyStore

@testable import TallySQLite

/// The embedded store serves wallets from memory: it must own its file, and the cache must never answer
/// with a wallet older than the last committed change.
@Suite("SQLite wallet cache and file ownership")
struct SQLiteWalletCacheTests {
    @Test("A second store on the same file is refused until the first is released")
    func ownership() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-owner-\(randomId())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("tally.sqlite").path
        var first: SQLiteStore? = try SQLiteStore(path: path)
        #expect(throws: SQLiteStore.DatabaseInUse.self) { try SQLiteStore(path: path) }
        #expect(first != nil)
        first = nil
        _ = try SQLiteStore(path: path)
    }

    @Test("A read that began before a commit cannot store what the commit replaced")
    func epochGuardsStores() {
        let cache = WalletCache()
        let now = defaultStart
        let old = WalletState(balance: 10, held: 0, version: 1)
        let readBegan = cache.epoch
        cache.forget("u")  // a commit landed while the read was running
        cache.store(.init(wallet: old, firstExpiry: nil), for: "u", readAt: readBegan)
        #expect(cache.wallet("u", now: now) == nil)

        let fresh = cache.epoch
        cache.store(.init(wallet: old, firstExpiry: nil), for: "u", readAt: fresh)
        #expect(cache.wallet("u", now: now) == old)
        cache.forget("u")
        #expect(cache.wallet("u", now: now) == nil)
    }

    @Test("A cached wallet with a hold misses from the hold's expiry on")
    func holdExpiryMisses() {
        let cache = WalletCache()
        let held = WalletState(balance: 10, held: 4, version: 2)
        cache.store(.init(wallet: held, firstExpiry: defaultStart.addingTimeInterval(60)), for: "u", readAt: cache.epoch)
        #expect(cache.wallet("u", now: defaultStart.addingTimeInterval(59)) == held)
        #expect(cache.wallet("u", now: defaultStart.addingTimeInterval(60)) == nil)
    }

    @Test("Reads racing writes end at the committed wallet")
    func readsRacingWrites() async throws {
        try await withFixture(.sqlite) { f in
            let store = try #require(f.store as? SQLiteStore)
            let userId = try await f.newUser(tokens: 1)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<400 {
                    group.addTask {
                        if index % 4 == 0 {
                            _ = try await f.run(.grant(userId: userId, amount: 1, reason: "race"))
                        } else {
                            _ = try await store.wallet(userId: userId, now: f.now)
                        }
                    }
                }
                try await group.waitForAll()
            }
            let committed = try await store.pool.read { db -> WalletState? in
                try Row.fetchOne(db, sql: "SELECT balance, held, version FROM wallets WHERE user_id = ?", arguments: [userId])
                    .map { WalletState(balance: $0["balance"], held: $0["held"], version: $0["version"]) }
            }
            let served = try await store.wallet(userId: userId, now: f.now)
            #expect(served != nil && served == committed)
            #expect(served?.balance == 101)
        }
    }
}
