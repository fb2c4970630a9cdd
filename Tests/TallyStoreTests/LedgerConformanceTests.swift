import Foundation
import TallyStore
import Testing

private let aiQuery = ActionSpec(name: "ai.query", tokens: 3)
private let penny = ActionSpec(name: "penny", tokens: 1)

/// A render failure that must abort the command.
private struct RenderFailure: Error, Equatable {}

/// Grants, debits under contention, idempotency and rendering, against every store.
@Suite("Ledger conformance", .timeLimit(.minutes(10)))
struct LedgerConformanceTests {
    @Test("execute: grant appends an entry and returns the state", arguments: StoreKind.allCases)
    func grant(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let userId = try await f.newUser()
            let outcome = try await f.run(.grant(userId: userId, amount: 100, reason: "promo"))
            let entry = try #require(outcome.entry, "[\(kind)]")
            #expect(entry.kind == .grant && entry.amount == 100 && entry.heldChange == 0 && entry.balanceAfter == 100, "[\(kind)]")
            #expect(entry.reason == "promo" && entry.createdAt == f.now, "[\(kind)]")
            #expect(outcome.state.wallet == WalletState(balance: 100, held: 0, version: 1), "[\(kind)]")
            #expect(outcome.state.user.id == userId && outcome.state.counters.isEmpty, "[\(kind)]")
            #expect(outcome.hold == nil && outcome.payment == nil, "[\(kind)]")
            #expect(try await f.allEntries(userId) == [entry], "[\(kind)]")

            let second = try await f.run(.grant(userId: userId, amount: 5, reason: "more"))
            #expect(second.entry.map { $0.id > entry.id } == true, "[\(kind)]")
            #expect(second.state.wallet == WalletState(balance: 105, held: 0, version: 2), "[\(kind)]")

            await expectStoreError(.invalidInput, kind) { try await f.execute(.grant(userId: userId, amount: 0, reason: "zero")) }
            await expectStoreError(.userNotFound, kind) { try await f.execute(.grant(userId: randomId(), amount: 1, reason: "x")) }
            #expect(try await f.store.wallet(userId: userId, now: f.now)?.balance == 105, "[\(kind)]")
            try await f.checkInvariants([userId])
        }
    }

    @Test("wallet: concurrent reads of many accounts each get their own", arguments: StoreKind.allCases)
    func concurrentWalletReads(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            // PostgreSQL sends reads that wait at the same time as one statement: none may get another's wallet.
            var users: [String] = []
            for tokens in 1...12 { users.append(try await f.newUser(tokens: Int64(tokens))) }
            let holder = try await f.newUser(tokens: 50)
            try await f.run(.createHold(userId: holder, holdId: randomId("hold-"), amount: 30, expiresAt: f.now.addingTimeInterval(10)))
            f.clock.advance(by: 11)
            let now = f.now
            let unknown = randomId()
            let expected: [String: WalletState?] = Dictionary(
                uniqueKeysWithValues: users.enumerated().map { ($1, WalletState(balance: Int64($0 + 1), held: 0, version: 1)) }
                    + [(holder, WalletState(balance: 50, held: 0, version: 3)), (unknown, nil)])
            let ids = users + [holder, unknown]
            let reads = try await concurrently(300) { index in
                let userId = ids[index % ids.count]
                return (userId, try await f.store.wallet(userId: userId, now: now))
            }
            var wrong: [String] = []
            for read in reads {
                guard case .success(let (userId, wallet)) = read else { wrong.append("\(read)"); continue }
                if expected[userId] != wallet { wrong.append("\(userId): \(String(describing: wallet))") }
            }
            #expect(wrong.count == 0, "[\(kind)] \(wrong.prefix(5))")
            #expect(try await f.allEntries(holder).map(\.kind) == [.grant, .hold, .expire], "[\(kind)] released once")
            try await f.checkInvariants(users + [holder])
        }
    }

    @Test("execute: 200 concurrent 1-token actions on 100 tokens", arguments: StoreKind.allCases)
    func concurrentDebits(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let userId = try await f.newUser(tokens: 100)
            let attempts = try await concurrently(200) { _ in
                try await f.execute(.performAction(userId: userId, action: penny, quotaLimit: nil))
            }
            var executed = 0
            var refused: [StoreError] = []
            var unexpected: [String] = []
            for attempt in attempts {
                switch attempt {
                case .success(.executed): executed += 1
                case .failure(let error) where error.code == .insufficientTokens: refused.append(error)
                case .success(let other): unexpected.append("\(other)")
                case .failure(let error): unexpected.append("\(error)")
                case .other(let error): unexpected.append(error)
                }
            }
            #expect(executed == 100, "[\(kind)]")
            #expect(refused.count == 100, "[\(kind)]")
            #expect(unexpected.isEmpty, "[\(kind)] \(unexpected)")
            for error in refused {
                let state = try #require(error.state, "[\(kind)] insufficientTokens without state")
                #expect(state.user.id == userId && state.wallet.balance == 0 && state.wallet.held == 0, "[\(kind)] \(state.wallet)")
            }
            #expect(try await f.store.wallet(userId: userId, now: f.now) == WalletState(balance: 0, held: 0, version: 101), "[\(kind)]")
            let entries = try await f.allEntries(userId, pageSize: 16)
            #expect(entries.count == 101, "[\(kind)]")
            #expect(entries.filter { $0.kind == .debit && $0.amount == -1 && $0.reason == "penny" }.count == 100, "[\(kind)]")
            #expect(entries.map(\.balanceAfter) == Array((0...100).reversed()), "[\(kind)]")
            try await f.checkInvariants([userId])
        }
    }

    @Test("execute: concurrent debits of several accounts stay apart", arguments: StoreKind.allCases)
    func concurrentAccounts(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            var users: [String] = []
            for tokens in [Int64(10), 20, 30] { users.append(try await f.newUser(tokens: tokens)) }
            let accounts = users
            let attempts = try await concurrently(120) { index in
                try await f.execute(.performAction(userId: accounts[index % 3], action: penny, quotaLimit: nil))
            }
            let executed = attempts.filter { if case .success(.executed) = $0 { true } else { false } }.count
            let refused = attempts.filter { if case .failure(let error) = $0 { error.code == .insufficientTokens } else { false } }.count
            #expect(executed == 60 && refused == 60, "[\(kind)] executed \(executed), refused \(refused)")
            for userId in users {
                #expect(try await f.store.wallet(userId: userId, now: f.now)?.balance == 0, "[\(kind)]")
            }
            try await f.checkInvariants(users)
        }
    }

    @Test("execute: 50 concurrent calls with one idempotency key charge once", arguments: StoreKind.allCases)
    func concurrentIdempotency(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let userId = try await f.newUser(tokens: 10)
            let key = IdempotencyKey(scope: userId, key: randomId("key-"), fingerprint: "POST /v1/actions/ai.query")
            let command = Command.performAction(userId: userId, action: aiQuery, quotaLimit: nil)
            let attempts = try await concurrently(50) { _ in try await f.execute(command, key: key) }
            let original = try KeyedAttempts(attempts).expectOneCharge(of: 50, "[\(kind)]")
            let body = try RenderedBody.decode(original)
            #expect(body.balance == 7 && body.payment == "charge(3)" && body.entryKind == "debit", "[\(kind)]")
            #expect(try await f.store.wallet(userId: userId, now: f.now)?.balance == 7, "[\(kind)]")
            #expect(try await f.allEntries(userId).filter { $0.kind == .debit }.count == 1, "[\(kind)]")

            // Later, after the books moved: the stored bytes, not a new rendering.
            try await f.run(.grant(userId: userId, amount: 5, reason: "top-up"))
            f.clock.advance(by: 60)
            #expect(try await f.execute(command, key: key) == .replayed(original), "[\(kind)]")
            await expectStoreError(.idempotencyMismatch, kind) {
                try await f.execute(command, key: IdempotencyKey(scope: userId, key: key.key, fingerprint: "POST /v1/actions/other"))
            }
            #expect(try await f.store.wallet(userId: userId, now: f.now)?.balance == 12, "[\(kind)]")

            // The same key string in another scope is another key.
            let other = try await f.newUser(tokens: 3)
            let otherKey = IdempotencyKey(scope: other, key: key.key, fingerprint: "POST /v1/actions/ai.query")
            let execution = try await f.execute(.performAction(userId: other, action: aiQuery, quotaLimit: nil), key: otherKey)
            guard case .executed(let response) = execution else {
                Issue.record("[\(kind)] a key of another scope replayed: \(execution)")
                return
            }
            #expect(try RenderedBody.decode(response).balance == 0, "[\(kind)]")
            try await f.checkInvariants([userId, other])
        }
    }

    @Test("execute: a refused command stores nothing under its key", arguments: StoreKind.allCases)
    func refusedCommandStoresNothing(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let userId = try await f.newUser()
            let key = IdempotencyKey(scope: userId, key: randomId("key-"), fingerprint: "fp")
            let command = Command.performAction(userId: userId, action: aiQuery, quotaLimit: nil)
            let error = await expectStoreError(.insufficientTokens, kind) { try await f.execute(command, key: key) }
            #expect(error?.state?.wallet == WalletState(balance: 0, held: 0, version: 0), "[\(kind)]")
            #expect(error?.state?.user.id == userId, "[\(kind)]")
            #expect(try await f.store.wallet(userId: userId, now: f.now) == WalletState(balance: 0, held: 0, version: 0), "[\(kind)]")
            #expect(try await f.allEntries(userId).isEmpty, "[\(kind)]")

            try await f.run(.grant(userId: userId, amount: 5, reason: "top-up"))
            let execution = try await f.execute(command, key: key)
            guard case .executed(let response) = execution else {
                Issue.record("[\(kind)] the refused key was stored: \(execution)")
                return
            }
            #expect(try RenderedBody.decode(response).balance == 2, "[\(kind)]")
            #expect(try await f.execute(command, key: key) == .replayed(response), "[\(kind)]")
            #expect(try await f.store.wallet(userId: userId, now: f.now)?.balance == 2, "[\(kind)]")
            try await f.checkInvariants([userId])
        }
    }

    @Test("execute: concurrent commands that fail, before or after writing, leave nothing and spoil no other", arguments: StoreKind.allCases)
    func failuresAmongConcurrentCommands(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            var accounts: [String] = []
            for _ in 0..<4 { accounts.append(try await f.newUser(tokens: 10)) }
            let users = accounts
            let dear = ActionSpec(name: "dear", tokens: 1000)
            // Every third command is refused by its plan (nothing written), every third fails in its render,
            // after its writes, the rest must all stand. The render fails with a store error in one round
            // (a store must not take it for a refusal that wrote nothing) and with another error in the next.
            let failures: [@Sendable () -> any Error] = [{ StoreError(.invalidInput) }, { RenderFailure() }]
            for (round, failure) in failures.enumerated() {
                let keys = (0..<120).map { index in IdempotencyKey(scope: users[index % 4], key: randomId("key-"), fingerprint: "fp") }
                let attempts = try await concurrently(120) { index in
                    let userId = users[index % 4]
                    switch index % 3 {
                    case 0: return try await f.execute(.grant(userId: userId, amount: 1, reason: "ok"), key: keys[index])
                    case 1:
                        return try await f.store.execute(.grant(userId: userId, amount: 100, reason: "bad"), idempotency: keys[index], now: f.now) {
                            _ in throw failure()
                        }
                    default: return try await f.execute(.performAction(userId: userId, action: dear, quotaLimit: nil), key: keys[index])
                    }
                }
                let executed = attempts.filter { if case .success(.executed) = $0 { true } else { false } }.count
                let refused = attempts.filter { if case .failure(let error) = $0 { error.code == .insufficientTokens } else { false } }.count
                let renders = attempts.filter {
                    switch $0 {
                    case .failure(let error): error.code == .invalidInput || error.underlying is RenderFailure
                    case .other: true
                    case .success: false
                    }
                }.count
                #expect(executed == 40 && refused == 40 && renders == 40, "[\(kind)] round \(round): \(attempts)")
                for userId in users {
                    #expect(try await f.store.wallet(userId: userId, now: f.now)?.balance == 10 + 10 * Int64(round + 1), "[\(kind)]")
                }
                // A failed command used nothing up, its key included.
                let retry = try await f.execute(.grant(userId: users[1], amount: 1, reason: "retry"), key: keys[1])
                if case .executed = retry {} else { Issue.record("[\(kind)] the retry was \(retry)") }
                let undo = try await f.execute(.performAction(userId: users[1], action: penny, quotaLimit: nil))
                if case .executed = undo {} else { Issue.record("[\(kind)] \(undo)") }
            }
            try await f.checkInvariants(users)
        }
    }

    @Test("execute: render sees the outcome, and a render failure aborts the command", arguments: StoreKind.allCases)
    func render(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let userId = try await f.newUser(tokens: 10)
            let key = IdempotencyKey(scope: userId, key: randomId("key-"), fingerprint: "fp")
            let command = Command.grant(userId: userId, amount: 4, reason: "render")
            do {
                _ = try await f.store.execute(command, idempotency: key, now: f.now) { _ in throw RenderFailure() }
                Issue.record("[\(kind)] a failing render did not fail execute")
            } catch {
                // The render error itself, or wrapped by the store: either way the command failed.
                #expect(error is RenderFailure || (error as? StoreError)?.underlying is RenderFailure, "[\(kind)] \(error)")
            }
            #expect(try await f.store.wallet(userId: userId, now: f.now) == WalletState(balance: 10, held: 0, version: 1), "[\(kind)]")

            let execution = try await f.store.execute(command, idempotency: key, now: f.now) { outcome in
                StoredResponse(status: 201, body: Array("balance=\(outcome.state.wallet.balance);entry=\(outcome.entry?.amount ?? 0)".utf8))
            }
            #expect(execution == .executed(StoredResponse(status: 201, body: Array("balance=14;entry=4".utf8))), "[\(kind)]")
            // A store may render an attempt it then abandons (PostgreSQL plans from its cached account and
            // finds the key used only when it writes); what a replay returns is the stored response.
            let replay = try await f.store.execute(command, idempotency: key, now: f.now) { _ in
                StoredResponse(status: 500, body: Array("rendered again".utf8))
            }
            #expect(replay == .replayed(StoredResponse(status: 201, body: Array("balance=14;entry=4".utf8))), "[\(kind)]")
            try await f.checkInvariants([userId])
        }
    }
}
