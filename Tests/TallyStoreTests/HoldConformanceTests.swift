import Foundation
import TallyStore
import Testing

/// Holds: create, capture, release, expiry and sweeping, against every store.
@Suite("Hold conformance", .timeLimit(.minutes(10)))
struct HoldConformanceTests {
    @Test("holds: create, capture for less, release", arguments: StoreKind.allCases)
    func lifecycle(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let userId = try await f.newUser(tokens: 100)
            let h1 = randomId("hold-")
            let expires = f.now.addingTimeInterval(600)
            let created = try await f.run(.createHold(userId: userId, holdId: h1, amount: 30, expiresAt: expires))
            let hold = HoldRecord(
                id: h1, userId: userId, amount: 30, status: .open, capturedAmount: nil, createdAt: f.now, expiresAt: expires)
            #expect(created.hold == hold, "[\(kind)]")
            let holdEntry = try #require(created.entry, "[\(kind)]")
            #expect(
                holdEntry.kind == .hold && holdEntry.amount == 0 && holdEntry.heldChange == 30 && holdEntry.balanceAfter == 100, "[\(kind)]"
            )
            #expect(
                created.state.wallet.balance == 100 && created.state.wallet.held == 30 && created.state.wallet.available == 70, "[\(kind)]")
            #expect(try await f.store.hold(id: h1, userId: userId) == hold, "[\(kind)]")

            let refusal = await expectStoreError(.insufficientTokens, kind) {
                try await f.execute(.createHold(userId: userId, holdId: randomId("hold-"), amount: 71, expiresAt: expires))
            }
            #expect(refusal?.state?.wallet.available == 70, "[\(kind)]")

            f.clock.advance(by: 10)
            let captured = try await f.run(.captureHold(userId: userId, holdId: h1, amount: 20))
            #expect(captured.hold?.status == .captured && captured.hold?.capturedAmount == 20, "[\(kind)]")
            let captureEntry = try #require(captured.entry, "[\(kind)]")
            #expect(
                captureEntry.kind == .capture && captureEntry.amount == -20 && captureEntry.heldChange == -30
                    && captureEntry.balanceAfter == 80, "[\(kind)]")
            #expect(captured.state.wallet.balance == 80 && captured.state.wallet.held == 0, "[\(kind)]")
            let stored = try await f.store.hold(id: h1, userId: userId)
            #expect(stored?.status == .captured && stored?.capturedAmount == 20 && stored?.amount == 30, "[\(kind)]")
            await expectStoreError(.holdNotOpen, kind) { try await f.execute(.captureHold(userId: userId, holdId: h1, amount: 1)) }
            await expectStoreError(.holdNotOpen, kind) { try await f.execute(.releaseHold(userId: userId, holdId: h1)) }

            let h2 = randomId("hold-")
            try await f.run(.createHold(userId: userId, holdId: h2, amount: 25, expiresAt: expires))
            let released = try await f.run(.releaseHold(userId: userId, holdId: h2))
            #expect(released.hold?.status == .released && released.hold?.capturedAmount == nil, "[\(kind)]")
            #expect(released.entry?.kind == .release && released.entry?.amount == 0 && released.entry?.heldChange == -25, "[\(kind)]")
            #expect(released.state.wallet.balance == 80 && released.state.wallet.held == 0, "[\(kind)]")
            await expectStoreError(.holdNotOpen, kind) { try await f.execute(.releaseHold(userId: userId, holdId: h2)) }

            let h3 = randomId("hold-")
            try await f.run(.createHold(userId: userId, holdId: h3, amount: 10, expiresAt: expires))
            await expectStoreError(.invalidInput, kind) { try await f.execute(.captureHold(userId: userId, holdId: h3, amount: 11)) }
            #expect(try await f.store.hold(id: h3, userId: userId)?.status == .open, "[\(kind)]")
            let full = try await f.run(.captureHold(userId: userId, holdId: h3, amount: 10))
            #expect(full.state.wallet.balance == 70 && full.state.wallet.held == 0, "[\(kind)]")

            let entries = try await f.allEntries(userId)
            #expect(entries.map(\.kind) == [.grant, .hold, .capture, .hold, .release, .hold, .capture], "[\(kind)]")
            try await f.checkInvariants([userId])
        }
    }

    @Test("holds: another account's hold is not found", arguments: StoreKind.allCases)
    func otherUsersHold(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let owner = try await f.newUser(tokens: 50)
            let stranger = try await f.newUser(tokens: 50)
            let holdId = randomId("hold-")
            try await f.run(.createHold(userId: owner, holdId: holdId, amount: 20, expiresAt: f.now.addingTimeInterval(600)))
            await expectStoreError(.holdNotFound, kind) { try await f.execute(.captureHold(userId: stranger, holdId: holdId, amount: 5)) }
            await expectStoreError(.holdNotFound, kind) { try await f.execute(.releaseHold(userId: stranger, holdId: holdId)) }
            await expectStoreError(.holdNotFound, kind) { try await f.execute(.releaseHold(userId: owner, holdId: randomId("hold-"))) }
            #expect(try await f.store.hold(id: holdId, userId: stranger) == nil, "[\(kind)]")
            #expect(try await f.store.hold(id: holdId, userId: owner)?.status == .open, "[\(kind)]")
            #expect(try await f.store.wallet(userId: owner, now: f.now) == WalletState(balance: 50, held: 20, version: 2), "[\(kind)]")
            #expect(try await f.store.wallet(userId: stranger, now: f.now) == WalletState(balance: 50, held: 0, version: 1), "[\(kind)]")
            try await f.checkInvariants([owner, stranger])
        }
    }

    @Test("holds: expiry releases the tokens on read", arguments: StoreKind.allCases)
    func expiryOnRead(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let userId = try await f.newUser(tokens: 100)
            let holdId = randomId("hold-")
            let expires = f.now.addingTimeInterval(60)
            try await f.run(.createHold(userId: userId, holdId: holdId, amount: 40, expiresAt: expires))
            f.clock.advance(by: 59)
            #expect(try await f.store.wallet(userId: userId, now: f.now) == WalletState(balance: 100, held: 40, version: 2), "[\(kind)]")

            f.clock.advance(by: 2)
            #expect(try await f.store.wallet(userId: userId, now: f.now) == WalletState(balance: 100, held: 0, version: 3), "[\(kind)]")
            let entries = try await f.allEntries(userId)
            #expect(entries.map(\.kind) == [.grant, .hold, .expire], "[\(kind)]")
            let expiry = try #require(entries.last)
            #expect(expiry.amount == 0 && expiry.heldChange == -40 && expiry.balanceAfter == 100 && expiry.reason == holdId, "[\(kind)]")
            #expect(try await f.store.hold(id: holdId, userId: userId)?.status == .expired, "[\(kind)]")
            await expectStoreError(.holdNotOpen, kind) { try await f.execute(.captureHold(userId: userId, holdId: holdId, amount: 1)) }
            await expectStoreError(.holdNotOpen, kind) { try await f.execute(.releaseHold(userId: userId, holdId: holdId)) }
            // Reading again expires nothing more.
            #expect(
                try await f.store.accountState(userId: userId, now: f.now)?.wallet == WalletState(balance: 100, held: 0, version: 3),
                "[\(kind)]")
            try await f.checkInvariants([userId])
        }
    }

    @Test("holds: execute releases expired holds before planning", arguments: StoreKind.allCases)
    func expiryInsideExecute(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let userId = try await f.newUser(tokens: 50)
            let stale = randomId("hold-")
            try await f.run(.createHold(userId: userId, holdId: stale, amount: 40, expiresAt: f.now.addingTimeInterval(60)))
            f.clock.advance(by: 60)
            // The whole balance is available again without any read in between.
            let fresh = randomId("hold-")
            let outcome = try await f.run(.createHold(userId: userId, holdId: fresh, amount: 50, expiresAt: f.now.addingTimeInterval(60)))
            #expect(outcome.state.wallet == WalletState(balance: 50, held: 50, version: 4), "[\(kind)]")
            #expect(try await f.allEntries(userId).map(\.kind) == [.grant, .hold, .expire, .hold], "[\(kind)]")
            #expect(try await f.store.hold(id: stale, userId: userId)?.status == .expired, "[\(kind)]")

            // Capturing an expired hold is refused, and afterwards the read still releases it.
            f.clock.advance(by: 61)
            await expectStoreError(.holdNotOpen, kind) { try await f.execute(.captureHold(userId: userId, holdId: fresh, amount: 50)) }
            #expect(
                try await f.store.accountState(userId: userId, now: f.now)?.wallet == WalletState(balance: 50, held: 0, version: 5),
                "[\(kind)]")
            try await f.checkInvariants([userId])
        }
    }

    @Test("holds: concurrent holds and captures", arguments: StoreKind.allCases)
    func concurrentHolds(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let userId = try await f.newUser(tokens: 100)
            let expires = f.now.addingTimeInterval(600)
            let holdIds = (0..<20).map { _ in randomId("hold-") }
            let creations = try await concurrently(20) { index in
                try await f.execute(.createHold(userId: userId, holdId: holdIds[index], amount: 10, expiresAt: expires))
            }
            let created = creations.filter { if case .success(.executed) = $0 { true } else { false } }.count
            let refused = creations.filter { if case .failure(let error) = $0 { error.code == .insufficientTokens } else { false } }.count
            #expect(created == 10 && refused == 10, "[\(kind)] created \(created), refused \(refused)")

            var open: [String] = []
            for holdId in holdIds where try await f.store.hold(id: holdId, userId: userId)?.status == .open { open.append(holdId) }
            #expect(open.count == 10, "[\(kind)]")
            let target = try #require(open.first)
            let captures = try await concurrently(10) { index in
                try await f.execute(
                    index.isMultiple(of: 2)
                        ? .captureHold(userId: userId, holdId: target, amount: 5) : .releaseHold(userId: userId, holdId: target))
            }
            let settled = captures.filter { if case .success(.executed) = $0 { true } else { false } }.count
            let notOpen = captures.filter { if case .failure(let error) = $0 { error.code == .holdNotOpen } else { false } }.count
            #expect(settled == 1 && notOpen == 9, "[\(kind)] settled \(settled), refused \(notOpen)")
            let wallet = try #require(try await f.store.wallet(userId: userId, now: f.now))
            let status = try await f.store.hold(id: target, userId: userId)?.status
            #expect(wallet.held == 90, "[\(kind)]")
            #expect(wallet.balance == (status == .captured ? 95 : 100), "[\(kind)] \(String(describing: status))")
            try await f.checkInvariants([userId])
        }
    }

    @Test("expireHolds: sweeps the expired holds of every account", arguments: StoreKind.allCases)
    func sweep(kind: StoreKind) async throws {
        // `expireHolds` sweeps every account: on PostgreSQL this test gets a schema of its own.
        try await withFixture(kind, isolated: true) { f in
            let a = try await f.newUser(tokens: 50)
            let b = try await f.newUser(tokens: 50)
            let c = try await f.newUser(tokens: 50)
            let holds: [(String, String, Int64, TimeInterval)] = [
                (a, randomId("hold-"), Int64(10), 60.0), (a, randomId("hold-"), 15, 90), (b, randomId("hold-"), 20, 120),
                (c, randomId("hold-"), 5, 3_600),
            ]
            for (userId, holdId, amount, seconds) in holds {
                try await f.run(.createHold(userId: userId, holdId: holdId, amount: amount, expiresAt: f.now.addingTimeInterval(seconds)))
            }
            f.clock.advance(by: 30)
            let early = try await f.store.expireHolds(now: f.now, limit: 100)
            #expect(early.isEmpty, "[\(kind)]")

            f.clock.advance(by: 570)
            let swept = try await f.store.expireHolds(now: f.now, limit: 100)
            #expect(swept == [a: 2, b: 1], "[\(kind)]")
            for (userId, holdId, _, seconds) in holds {
                let status = try await f.store.hold(id: holdId, userId: userId)?.status
                #expect(status == (seconds < 600 ? .expired : .open), "[\(kind)]")
            }
            // The sweep wrote the expire entries; reads find nothing left to release.
            #expect(try await f.allEntries(a).map(\.kind) == [.grant, .hold, .hold, .expire, .expire], "[\(kind)]")
            #expect(try await f.store.wallet(userId: a, now: f.now) == WalletState(balance: 50, held: 0, version: 5), "[\(kind)]")
            #expect(try await f.store.wallet(userId: b, now: f.now) == WalletState(balance: 50, held: 0, version: 3), "[\(kind)]")
            #expect(try await f.store.wallet(userId: c, now: f.now) == WalletState(balance: 50, held: 5, version: 2), "[\(kind)]")
            #expect(try await f.store.expireHolds(now: f.now, limit: 100).isEmpty, "[\(kind)]")
            try await f.checkInvariants([a, b, c])
        }
    }

    @Test("expireHolds: releases the expired holds of at most limit accounts per call, oldest first", arguments: StoreKind.allCases)
    func sweepLimit(kind: StoreKind) async throws {
        try await withFixture(kind, isolated: true) { f in
            let a = try await f.newUser(tokens: 50)
            let b = try await f.newUser(tokens: 50)
            var holds: [(String, String)] = []
            for (userId, seconds) in [(a, 10), (a, 20), (a, 30), (b, 40)] as [(String, TimeInterval)] {
                let holdId = randomId("hold-")
                holds.append((userId, holdId))
                try await f.run(.createHold(userId: userId, holdId: holdId, amount: 5, expiresAt: f.now.addingTimeInterval(seconds)))
            }
            f.clock.advance(by: 60)
            var counts: [Int] = []
            for _ in 0..<10 {
                let count = try await f.store.expireHolds(now: f.now, limit: 1).values.reduce(0, +)
                counts.append(count)
                if count == 0 { break }
            }
            // One account per call: first a (owner of the oldest expired hold, all three of its holds), then b.
            #expect(counts == [3, 1, 0], "[\(kind)] \(counts)")
            for (userId, holdId) in holds {
                #expect(try await f.store.hold(id: holdId, userId: userId)?.status == .expired, "[\(kind)]")
            }
            try await f.checkInvariants([a, b])
        }
    }
}
