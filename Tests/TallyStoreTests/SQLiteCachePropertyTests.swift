import Foundation
import GRDB
import TallyStore
import TallyTestKit
import Testing

@testable import TallySQLite

/// The SQLite store's caches (wallets, session liveness, range pages, purchase replays) forget what a commit changed
/// because every write is declared with the tables it changes (``SQLiteWrites``): a seeded random run of store
/// operations across a few accounts, and after each one every cached answer equals an uncached read of the same file
/// through a connection of the test's own. The run must go through every declared write of a table some cache reads,
/// so that each cached table is exercised through each of its writes.
@Suite("SQLite caches agree with the database after every declared write", .timeLimit(.minutes(10)))
struct SQLiteCachePropertyTests {
    @Test("Seeded runs: after each operation every cached answer equals an uncached read; every cached table's writes ran",
        arguments: [UInt64(7), 2027])
    func cachesAgreeWithTheDatabase(seed: UInt64) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-cache-property-\(randomId())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("tally.sqlite").path
        let store = try SQLiteStore(path: path, checkpoint: (1_000, 3_000), countingWrites: true)
        try await store.migrate()
        var configuration = Configuration()
        configuration.readonly = true
        let truth = try DatabaseQueue(path: path, configuration: configuration)

        var run = CacheRun(store: store, truth: truth, fixture: Fixture(store: store, kind: .sqlite, clock: ManualClock(defaultStart)), seed: seed)
        for _ in 0..<4 { try await run.newGuest() }
        for step in 0..<CacheRun.steps {
            let operation = try await run.randomOperation()
            // The first operation after which a cache disagrees is the one to look at: the run stops there.
            guard try await run.checkCaches(step: step, after: operation) else { return }
        }

        let runs = try #require(store.changes.tally).runs
        let cached = WriterChanges.cachedTables
        let unexercised = SQLiteWrites.all.filter { !$0.write.changes.isDisjoint(with: cached) && runs[$0.write.sql, default: 0] == 0 }
        #expect(unexercised.isEmpty, "seed \(seed): declared writes of cached tables that never ran: \(unexercised.map(\.name))")
    }

    @Test("SQLiteWrites.all lists every declaration of SQLiteWrites*.swift once")
    func everyDeclarationIsListed() throws {
        let declared = try WriteDeclarationScanner.declarations(storeFolder: "TallySQLite").filter { $0.file.hasPrefix("SQLiteWrites") }
        #expect(SQLiteWrites.all.count == declared.count, "\(declared.count) declarations, \(SQLiteWrites.all.count) listed")
        #expect(Set(SQLiteWrites.all.map(\.write.sql)).count == SQLiteWrites.all.count, "two declarations share their SQL")
        #expect(Set(SQLiteWrites.all.map(\.name)).count == SQLiteWrites.all.count)
    }
}

/// A small deterministic generator (SplitMix64), so a failing run can be replayed from its seed.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    /// A generator starting from `seed`.
    init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// One random run: the store, a read-only connection of the test's own to the same file (the truth), and what the
/// run created so far (accounts, sessions, holds, purchases), so each operation picks among them.
struct CacheRun {
    /// Operations per run.
    static let steps = 420

    /// The store under test (counting its writes).
    let store: SQLiteStore
    /// A read-only connection of the test's own to the store's file: the uncached truth.
    let truth: DatabaseQueue
    /// The store with its manual clock and the harness's helpers.
    let fixture: Fixture
    /// The run's generator.
    var random: SeededGenerator

    /// Everything created, deleted ones too (their caches must forget them).
    var users: [String] = []
    /// The accounts that are guests (of an installation), neither linked nor merged.
    var guests: Set<String> = []
    /// The linked accounts (an email or an Apple identity): what guests merge into.
    var accounts: Set<String> = []
    /// The accounts deleted.
    var deleted: Set<String> = []
    /// Each guest's installation.
    var devices: [String: String] = [:]
    /// Apple `sub` → the account it signs in to.
    var appleSubjects: [String: String] = [:]
    /// Session id → its latest refresh token hash; hashes already rotated away.
    var sessions: [String: String] = [:]
    /// Refresh tokens already exchanged (presenting one again revokes its session).
    var rotated: [String] = []
    /// Holds opened (settled or not).
    var holds: [(userId: String, holdId: String)] = []
    /// Consumables bought, with their buyer (whose replays are checked).
    var consumables: [(transaction: VerifiedTransaction, userId: String)] = []
    /// Apple notices sent, for their ids.
    var noticeCount = 0

    /// A collection without a range key.
    static let notes = CollectionSpec(name: "notes")
    /// A collection ordered by `date`.
    static let logs = CollectionSpec(name: "habit_logs", rangeKey: "date")
    /// The range queries whose pages are checked, for every account.
    static let queries = [
        DocumentRangeQuery(collection: "notes", limit: 3), DocumentRangeQuery(collection: "habit_logs", descending: true, limit: 10),
    ]

    /// The store under test (counting its writes).
    init(store: SQLiteStore, truth: DatabaseQueue, fixture: Fixture, seed: UInt64) {
        (self.store, self.truth, self.fixture, random) = (store, truth, fixture, SeededGenerator(seed: seed))
    }

    /// The clock's instant.
    var now: Date { fixture.now }

    // MARK: Picking

    /// One of `values`, or `nil` when there are none.
    mutating func pick<T>(_ values: [T]) -> T? { values.isEmpty ? nil : values[Int.random(in: 0..<values.count, using: &random)] }
    /// One of `values` (in sorted order, so the seed decides), or `nil`.
    mutating func pick(_ values: Set<String>) -> String? { pick(values.sorted()) }
    /// Whether a `percent` chance came up.
    mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &random) < percent }
    /// A number in `range`.
    mutating func number(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
    /// The accounts not deleted.
    var live: Set<String> { Set(users).subtracting(deleted) }

    // MARK: Operations

    /// Runs one operation picked at random; returns its name. A refusal the store throws (not enough tokens, a merge
    /// refused…) is an outcome like any other.
    mutating func randomOperation() async throws -> String {
        let operations: [(String, (inout CacheRun) async throws -> Void)] = [
            ("new guest", { try await $0.newGuest() }),
            ("guest signs in again", { try await $0.guestSignsInAgain() }),
            ("grant", { try await $0.grant() }),
            ("metered action", { try await $0.meteredAction() }),
            ("profile or premium", { try await $0.profile() }),
            ("open hold", { try await $0.openHold() }),
            ("settle hold", { try await $0.settleHold() }),
            ("time passes", { run in
                let seconds = run.number(1...400)
                run.fixture.clock.advance(by: TimeInterval(seconds))
            }),
            ("expire holds (maintenance)", { _ = try await $0.store.expireHolds(now: $0.now, limit: 10) }),
            ("rotate refresh token", { try await $0.rotate() }),
            ("reuse refresh token", { try await $0.reuse() }),
            ("revoke session", { try await $0.revokeSession() }),
            ("purge sessions", { _ = try await $0.store.purgeSessions(before: $0.now.addingTimeInterval(1), limit: 50) }),
            ("delete account", { try await $0.deleteAccount() }),
            ("link credentials", { try await $0.linkCredentials() }),
            ("verify email", { try await $0.verifyEmail() }),
            ("reset password", { try await $0.resetPassword() }),
            ("change password", { try await $0.changePassword() }),
            ("console revokes sessions", { try await $0.consoleRevokes() }),
            ("merge", { try await $0.merge() }),
            ("document write", { try await $0.writeDocument() }),
            ("push", { try await $0.push() }),
            ("purge tombstones", { try await $0.purgeTombstones() }),
            ("buy consumable", { try await $0.buyConsumable() }),
            ("refund consumable", { try await $0.refundConsumable() }),
            ("subscribe", { try await $0.subscribe() }),
            ("claim unowned subscription", { try await $0.claimUnownedSubscription() }),
            ("sign in with Apple", { try await $0.signInWithApple() }),
            ("link Apple", { try await $0.linkApple() }),
            ("Apple consent revoked", { try await $0.appleNotice(deleting: false) }),
            ("Apple account deleted", { try await $0.appleNotice(deleting: true) }),
        ]
        let (name, operation) = operations[number(0...(operations.count - 1))]
        do {
            try await operation(&self)
        } catch is StoreError {
            // A refusal: nothing it did stays.
        }
        return name
    }

    /// A refresh token that expires in `seconds`.
    func refresh(_ seconds: TimeInterval) -> NewRefreshToken {
        NewRefreshToken(hash: randomId("rt-"), expiresAt: now.addingTimeInterval(seconds))
    }

    /// Whether a `percent` chance came up.
    mutating func refreshLifetime() -> TimeInterval { chance(30) ? TimeInterval(number(60...600)) : 30 * 86_400 }

    /// A new installation signs in: a guest with a sign-up grant and a session.
    mutating func newGuest() async throws {
        let device = randomId("dev-")
        let sessionId = randomId("ses-")
        let token = refresh(refreshLifetime())
        let grant = try await store.signInGuest(
            deviceHash: device, ipHash: randomId("ip-"), signupsPerHour: 1_000, signupGrant: 20, sessionId: sessionId, refresh: token,
            sessionsPerUser: 3, now: now)
        users.append(grant.user.id)
        guests.insert(grant.user.id)
        devices[grant.user.id] = device
        sessions[sessionId] = token.hash
    }

    /// A guest's installation signs in again: one more session (the oldest beyond 3 revoked).
    mutating func guestSignsInAgain() async throws {
        guard let guest = pick(guests.subtracting(deleted)), let device = devices[guest] else { return }
        let sessionId = randomId("ses-")
        let token = refresh(refreshLifetime())
        _ = try await store.signInGuest(
            deviceHash: device, ipHash: randomId("ip-"), signupsPerHour: 1_000, signupGrant: 20, sessionId: sessionId, refresh: token,
            sessionsPerUser: 3, now: now)
        sessions[sessionId] = token.hash
    }

    /// An admin grant.
    mutating func grant() async throws {
        guard let user = pick(live) else { return }
        try await fixture.run(.grant(userId: user, amount: Int64(number(1...60)), reason: "test"))
    }

    /// A metered action: a daily quota first, then 3 tokens.
    mutating func meteredAction() async throws {
        guard let user = pick(live) else { return }
        try await fixture.run(.performAction(userId: user, action: ActionSpec(name: "chat", quota: "daily", tokens: 3), quotaLimit: 2))
    }

    /// A premium or profile change.
    mutating func profile() async throws {
        guard let user = pick(live) else { return }
        if chance(50) {
            try await fixture.run(.setPremium(userId: user, until: chance(50) ? now.addingTimeInterval(86_400) : nil))
        } else {
            try await fixture.run(.updateProfile(userId: user, timezone: pick(["UTC", "Asia/Tokyo"]), language: pick(["en", "ja"])))
        }
    }

    /// An AI hold, expiring within 10 minutes.
    mutating func openHold() async throws {
        guard let user = pick(live) else { return }
        let holdId = randomId("hold-")
        let expiresAt = now.addingTimeInterval(TimeInterval(number(30...600)))
        try await fixture.run(.createHold(userId: user, holdId: holdId, amount: Int64(number(1...10)), expiresAt: expiresAt))
        holds.append((user, holdId))
    }

    /// A hold captured or released (refused when it is not open any more).
    mutating func settleHold() async throws {
        guard let hold = pick(holds) else { return }
        if chance(50) {
            try await fixture.run(.captureHold(userId: hold.userId, holdId: hold.holdId, amount: Int64(number(0...3))))
        } else {
            try await fixture.run(.releaseHold(userId: hold.userId, holdId: hold.holdId))
        }
    }

    /// A session's refresh token exchanged for the next.
    mutating func rotate() async throws {
        guard let sessionId = pick(sessions.keys.sorted()), let hash = sessions[sessionId] else { return }
        let next = refresh(refreshLifetime())
        _ = try await store.rotateRefreshToken(hash: hash, next: next, now: now)
        sessions[sessionId] = next.hash
        rotated.append(hash)
    }

    /// An exchanged refresh token presented again: its session is revoked.
    mutating func reuse() async throws {
        guard let hash = pick(rotated) else { return }
        _ = try await store.rotateRefreshToken(hash: hash, next: refresh(86_400), now: now)
    }

    /// A sign-out.
    mutating func revokeSession() async throws {
        guard let sessionId = pick(sessions.keys.sorted()) else { return }
        try await store.revokeSession(id: sessionId, now: now)
    }

    /// An account deleted, by its owner or from the console (keeping at least 3).
    mutating func deleteAccount() async throws {
        guard live.count > 3, let user = pick(live) else { return }
        if chance(50) {
            _ = try await store.deleteUser(id: user)
        } else {
            _ = try await store.deleteUser(id: user, audit: audit(user))
        }
        deleted.insert(user)
    }

    /// A console audit row about `user`.
    func audit(_ user: String) -> NewAuditEntry {
        NewAuditEntry(at: now, operatorSession: "operator", action: "test", userId: user, before: nil, after: nil)
    }

    /// A guest links an email and password.
    mutating func linkCredentials() async throws {
        guard let guest = pick(guests.subtracting(deleted)) else { return }
        _ = try await store.linkCredentials(userId: guest, email: randomId("mail-") + "@example.com", passwordHash: "hash")
        guests.remove(guest)
        accounts.insert(guest)
    }

    /// A verification code issued and redeemed (after a wrong one, now and then).
    mutating func verifyEmail() async throws {
        guard let account = pick(accounts.subtracting(deleted)) else { return }
        let code = NewAccountCode(userId: account, purpose: .emailVerification, hash: "code", expiresAt: now.addingTimeInterval(600))
        _ = try await store.issueAccountCode(code, now: now)
        if chance(40) { _ = try await store.verifyEmail(userId: account, codeHash: "wrong", policy: AccountCodePolicy(), now: now) }
        _ = try await store.verifyEmail(userId: account, codeHash: "code", policy: AccountCodePolicy(), now: now)
    }

    /// A reset code issued and redeemed: the password set, every session revoked.
    mutating func resetPassword() async throws {
        guard let account = pick(accounts.subtracting(deleted)) else { return }
        let code = NewAccountCode(userId: account, purpose: .passwordReset, hash: "reset", expiresAt: now.addingTimeInterval(600))
        _ = try await store.issueAccountCode(code, now: now)
        _ = try await store.resetPassword(userId: account, codeHash: "reset", passwordHash: "new", policy: AccountCodePolicy(), now: now)
    }

    /// A password change, revoking the other sessions.
    mutating func changePassword() async throws {
        guard let account = pick(accounts.subtracting(deleted)) else { return }
        let keeping = pick(sessions.keys.sorted()) ?? "none"
        _ = try await store.changePassword(userId: account, passwordHash: "changed", keepingSession: keeping, now: now)
    }

    /// The console revokes an account's sessions.
    mutating func consoleRevokes() async throws {
        guard let user = pick(live) else { return }
        _ = try await store.revokeSessions(userId: user, audit: audit(user))
    }

    /// A guest merged into an account, with holds that have expired by then and holds that have not.
    mutating func merge() async throws {
        guard let guest = pick(guests.subtracting(deleted)), let account = pick(accounts.subtracting(deleted)) else { return }
        if chance(70) {
            // Holds of the guest's, one to have expired by the merge (released) and one not (moved to the account).
            try await fixture.run(.grant(userId: guest, amount: 10, reason: "holds"))
            for lifetime in [60, 900] {
                let holdId = randomId("hold-")
                try await fixture.run(
                    .createHold(userId: guest, holdId: holdId, amount: 2, expiresAt: now.addingTimeInterval(TimeInterval(lifetime))))
                holds.append((guest, holdId))
            }
        }
        if chance(70) {
            // A document of the guest's, which the merge writes into the account (`mergeDocument`): where the account
            // has none, or over the account's tombstone of it. Not left to chance elsewhere: the ids of users and
            // sessions are random, so which guest merges (and whether it has documents) differs from run to run.
            let id = "m\(number(0...2))"
            if chance(50) {
                try await fixture.put(account, Self.notes, id, #"{"text": "account's"}"#)
                try await fixture.delete(account, Self.notes, id)
            }
            try await fixture.put(guest, Self.notes, id, #"{"text": "\#(number(0...99))"}"#)
        }
        // Time passes first (the cached wallets are not read between), so that the first hold has expired.
        fixture.clock.advance(by: TimeInterval(number(61...300)))
        _ = try await store.merge(guestId: guest, into: account, now: now)
        guests.remove(guest)
    }

    /// A REST document write or delete.
    mutating func writeDocument() async throws {
        guard let user = pick(live) else { return }
        let id = "d\(number(0...4))"
        switch number(0...2) {
        case 0: try await fixture.put(user, Self.notes, id, #"{"text": "\#(number(0...99))"}"#)
        case 1: try await fixture.put(user, Self.logs, id, #"{"date": "2027-01-\#(10 + number(0...9))"}"#)
        default: try await fixture.delete(user, chance(50) ? Self.notes : Self.logs, id)
        }
    }

    /// A push of two mutations from the account's client.
    mutating func push() async throws {
        guard let user = pick(live) else { return }
        let client = "client-\(user)"
        let first = Int64(number(1...1_000_000))
        let mutations = [
            mutation(first, Self.notes, "p\(number(0...2))", .put(try json(#"{"n": \#(number(0...9))}"#))),
            mutation(first + 1, Self.logs, "p\(number(0...2))", chance(30) ? .delete : .put(try json(#"{"date": "2027-02-0\#(number(1...9))"}"#))),
        ]
        _ = try await store.push(userId: user, clientId: client, mutations: mutations, now: now)
    }

    /// A document deleted, then tombstones purged.
    mutating func purgeTombstones() async throws {
        if let user = pick(live) {
            // A tombstone to purge, at least.
            try await fixture.put(user, Self.notes, "gone", #"{"text": "soon gone"}"#)
            try await fixture.delete(user, Self.notes, "gone")
        }
        _ = try await store.purgeTombstones(before: now.addingTimeInterval(1), limit: 20)
    }

    /// A consumable bought and redeemed by its buyer.
    mutating func buyConsumable() async throws {
        guard let user = pick(live) else { return }
        let transaction = AppStoreFacts.consumable(tokens: Int64(number(10...50)), for: user, purchased: now)
        _ = try await store.redeem(transaction, userId: user, now: now)
        consumables.append((transaction, user))
    }

    /// A refund (in full or half) of a consumable bought.
    mutating func refundConsumable() async throws {
        guard let (transaction, _) = pick(consumables) else { return }
        let refunded = transaction.signed(at: now, revoked: now, percentage: chance(50) ? 100_000 : 50_000)
        _ = try await store.apply(AppStoreFacts.notification(.refund, refunded, signed: now), now: now)
    }

    /// A subscription redeemed.
    mutating func subscribe() async throws {
        guard let user = pick(live) else { return }
        let original = randomId("otx-")
        let period = AppStoreFacts.period(original, of: original, for: user, purchased: now, expires: now.addingTimeInterval(30 * 86_400))
        _ = try await store.redeem(period, userId: user, now: now)
    }

    /// A subscription notified for no account, then restored by an account (its row of no account dropped).
    mutating func claimUnownedSubscription() async throws {
        guard let user = pick(live) else { return }
        let original = randomId("otx-")
        let period = AppStoreFacts.period(
            original, of: original, for: randomId(), purchased: now, expires: now.addingTimeInterval(30 * 86_400))
        _ = try await store.apply(AppStoreFacts.notification(.subscribed, period, signed: now), now: now)
        _ = try await store.redeem(period, userId: user, now: now)
    }

    /// Sign in with Apple (a new `sub`, or a known one), now and then followed by its contact stored again.
    mutating func signInWithApple() async throws {
        let subject = chance(40) ? (pick(appleSubjects.keys.sorted()) ?? randomId("sub-")) : randomId("sub-")
        let sessionId = randomId("ses-")
        let token = refresh(refreshLifetime())
        let credential = AppleCredential(subject: subject, email: chance(50) ? "apple@example.com" : nil, refreshToken: "apple-rt")
        let grant = try await store.signInWithApple(
            credential, sessionId: sessionId, refresh: token, sessionsPerUser: 3, signupGrant: 20, now: now)
        if grant.created {
            users.append(grant.user.id)
            accounts.insert(grant.user.id)
        }
        appleSubjects[subject] = grant.user.id
        sessions[sessionId] = token.hash
        if chance(50) { _ = try await store.appleSignedIn(credential, now: now) }
    }

    /// An Apple identity linked to an account that has none.
    mutating func linkApple() async throws {
        guard let user = pick(live.subtracting(appleSubjects.values)) else { return }
        let subject = randomId("sub-")
        _ = try await store.linkApple(userId: user, credential: AppleCredential(subject: subject, email: nil, refreshToken: "rt"), now: now)
        appleSubjects[subject] = user
        guests.remove(user)
        accounts.insert(user)
    }

    /// Apple's notice that the consent was revoked or the Apple account deleted.
    mutating func appleNotice(deleting: Bool) async throws {
        guard let subject = pick(appleSubjects.keys.sorted()), let user = appleSubjects[subject] else { return }
        noticeCount += 1
        let notice = AppleAccountNotice(id: "notice-\(noticeCount)", subject: subject, eventTime: now, keepUntil: now.addingTimeInterval(86_400))
        if deleting {
            if case .deleted = try await store.appleAccountDeleted(notice, now: now) { deleted.insert(user) }
            appleSubjects[subject] = nil
        } else {
            _ = try await store.revokeAppleConsent(notice, now: now)
        }
    }

    // MARK: Checking

    /// Every cached answer — read through the store, as the server does — equals what the test's own connection reads;
    /// `false` when one did not.
    func checkCaches(step: Int, after operation: String) async throws -> Bool {
        let context = "step \(step) (\(operation))"
        var agree = true
        for user in users {
            // The store's read first: when a hold has expired it releases it through the writer, which the truth then sees.
            let cached = try await store.wallet(userId: user, now: now)
            let (wallet, firstExpiry) = try await truth.read { db in
                (
                    try Row.fetchOne(db, sql: "SELECT balance, held, version FROM wallets WHERE user_id = ?", arguments: [user])
                        .map(WalletState.init(row:)),
                    try Int64.fetchOne(
                        db, sql: "SELECT min(expires_at) FROM holds WHERE user_id = ? AND status = 'open'", arguments: [user]
                    ).map(Date.init(millis:))
                )
            }
            agree = agree && cached == wallet
            #expect(cached == wallet, "\(context): wallet of \(user): cached \(String(describing: cached)), stored \(String(describing: wallet))")
            if let entry = store.wallets.value(user), let wallet {
                agree = agree && entry.wallet == wallet && entry.firstExpiry == (wallet.held > 0 ? firstExpiry : nil)
                #expect(entry.wallet == wallet, "\(context): cached wallet entry of \(user)")
                #expect(entry.firstExpiry == (wallet.held > 0 ? firstExpiry : nil), "\(context): cached first expiry of \(user)")
            }
            for query in CacheRun.queries {
                let page = try await store.documents(userId: user, query: query)
                let stored = try await truth.read { db in
                    let (sql, arguments) = SQLiteStore.rangeStatement(userId: user, query)
                    let (documents, hasMore) = try SQLiteStore.page(query.bound, sql: sql, arguments: arguments, db)
                    return RangePage(documents: documents, hasMore: hasMore)
                }
                agree = agree && page == stored
                #expect(page == stored, "\(context): page \(query.collection) of \(user)")
            }
        }
        for sessionId in sessions.keys.sorted() {
            let cached = try await store.liveSessionUser(sessionId: sessionId)
            let stored = try await truth.read { db in
                try String.fetchOne(db, sql: "SELECT user_id FROM sessions WHERE id = ? AND revoked_at IS NULL", arguments: [sessionId])
            }
            agree = agree && cached == stored
            #expect(cached == stored, "\(context): session \(sessionId): cached \(cached ?? "none"), stored \(stored ?? "none")")
        }
        for (transaction, user) in consumables {
            let cached = try await store.replayed(transaction, userId: user, now: now)
            let now = self.now
            let stored = try await truth.read { db -> Redemption? in
                guard
                    let (account, purchase) = try Row.fetchOne(db, sql: SQLiteStore.replayQuery, arguments: [transaction.transactionId, user])
                        .map({ row in (AccountRow.decode(row), StoredPurchase(row: row)) })
                else { return nil }
                let holder = PurchaseAccount(user: account.user, wallet: account.wallet, otherPremiumUntil: nil)
                return PurchasePlanner.replay(transaction, by: user, purchase: purchase, account: holder, now: now)
            }
            agree = agree && cached == stored
            #expect(cached == stored, "\(context): replay of \(transaction.transactionId) by \(user)")
        }
        return agree
    }
}
