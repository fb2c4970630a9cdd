import Foundation
import Logging
import PostgresNIO
import TallyStore
import TallyTestKit
import Testing

@testable import TallyPostgres

/// This process's caches of the PostgreSQL store — ``AccountCache``, ``LiveSessions``, the range-query pages — forget
/// exactly what the store's own committed writes change, as their declarations (``Writes``) say: a seeded random
/// sequence of store operations across a few users, and after each one every answer a cache can give equals an
/// uncached read (a direct query, or a second store on the same schema that has not cached it).
///
/// The cached store runs its pool alone, without the revocation poller, and trusts its live sessions for an hour: so
/// nothing but the declarations' derivation makes it forget (the feed would otherwise cover a missing one within a
/// poll). A failure names the seed (`TALLY_PROPERTY_SEED` runs another).
@Suite("PostgreSQL: caches forget what declared writes change", .timeLimit(.minutes(10)))
struct PostgresCachePropertyTests {
    @Test("A random sequence of operations: every cached answer equals an uncached read, and every declaration a cache depends on runs")
    func cachesFollowDeclaredWrites() async throws {
        let seed = ProcessInfo.processInfo.environment["TALLY_PROPERTY_SEED"].flatMap { UInt64($0) } ?? 0x7A11_CAC4E
        try await withCachedAndUncachedStores { cached, uncached in
            var world = try await CacheWorld(cached: cached, uncached: uncached, seed: seed)
            try await world.check("the start")
            for step in 0..<world.steps {
                let done = try await world.randomOperation()
                try await world.check("step \(step): \(done)")
            }
            try await world.coverEveryCachedDeclaration()
            // The caches were in use, so the checks compared something.
            #expect(world.hits.accounts > 0 && world.hits.sessions > 0, "seed \(seed): the caches answered nothing: \(world.hits)")
            let runs = cached.declarationsRun.runs
            for name in Self.cachedDeclarationNames() {
                #expect(runs[name, default: 0] > 0, "seed \(seed): the declaration \(name) changes a table a cache reads and never ran")
            }
        }
    }

    @Test("The catalog lists every declaration the declaration files define")
    func catalogIsComplete() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/TallyPostgres")
        let files = try FileManager.default.contentsOfDirectory(atPath: sources.path)
            .filter { ($0.hasPrefix("PostgresWriteDeclarations") && !$0.contains("Catalog")) || $0 == "PostgresLedger.swift" }
        #expect(!files.isEmpty)
        var defined = Set<String>()
        let member = try Regex(#"static (?:func|let) ([A-Za-z0-9_]+)"#)
        for file in files {
            var text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            // PostgresLedger.swift declares its fragments in an extension of ``Writes`` beside other types.
            if file == "PostgresLedger.swift", let start = text.range(of: "extension Writes {") {
                text = String(text[start.lowerBound...].prefix { $0 != "\u{0}" })
                text = String(text[..<(text.range(of: "\n}\n")?.upperBound ?? text.endIndex)])
            }
            for match in text.matches(of: member) { defined.insert(String(text[match.output[1].range!])) }
        }
        var listed = Set<String>()
        for write in Writes.catalog { write.forEachDeclaration { name, _ in listed.insert(Self.memberName(name)) } }
        #expect(defined == listed, "declared but not in Writes.catalog: \(defined.subtracting(listed).sorted()); listed but not declared: \(listed.subtracting(defined).sorted())")
    }

    /// The member of a counted name: `append(from:carrying:)` → `append`.
    static func memberName(_ name: String) -> String { String(name.prefix { $0 != "(" }) }

    /// The declarations whose own tables a cache reads (``CacheSet``), by the name the store counts them under.
    static func cachedDeclarationNames() -> [String] {
        var names = Set<String>()
        for write in Writes.catalog {
            write.forEachDeclaration { name, declaration in
                if !CacheSet(reading: declaration.changes).isEmpty { names.insert(name) }
            }
        }
        return names.sorted()
    }
}

/// The users, sessions and holds of the sequence, and the operations on them.
private struct CacheWorld {
    let cached: PostgresStore
    let uncached: PostgresStore
    let fixture: Fixture
    let seed: UInt64
    var rng: SplitMix64
    /// How many random operations the sequence has.
    let steps = 160

    /// Accounts that may still exist (deleted and merged ones are kept: their answers are checked too).
    var users: [String] = []
    /// Guests with an installation (quota actions count it).
    var guests: Set<String> = []
    /// Accounts with an email (password changes, resets, merges into them).
    var linked: Set<String> = []
    /// Accounts with an Apple identity, by `sub`.
    var apple: [String: String] = [:]
    /// Every session made, with its latest refresh token's hash.
    var sessions: [String: String] = [:]
    var sessionUser: [String: String] = [:]
    /// Open holds by user.
    var holds: [String: [String]] = [:]
    /// Credited consumables, for refunds.
    var credited: [(VerifiedTransaction, String)] = []
    var documentCount = 0
    /// Mutation ids pushed so far (each push's id is new).
    var pushes: Int64 = 0

    /// An action that costs tokens.
    static let charge = ActionSpec(name: "charge", tokens: 3)
    /// An action that uses a quota (and a guest's installation's) before tokens.
    static let reading = ActionSpec(name: "reading", quota: "readings", tokens: 1)

    /// Three guests and an account with an email, on `cached`, with the clock at ``defaultStart``.
    init(cached: PostgresStore, uncached: PostgresStore, seed: UInt64) async throws {
        (self.cached, self.uncached, self.seed) = (cached, uncached, seed)
        rng = SplitMix64(seed: seed)
        fixture = Fixture(store: cached, kind: .postgres, clock: ManualClock(defaultStart))
        for _ in 0..<3 { try await newGuest() }
        let account = try await newGuest()
        try await link(account)
    }

    /// The sequence's business time (a ``ManualClock`` the operations advance).
    var now: Date { fixture.now }

    // MARK: Operations

    /// Runs one operation picked at random; returns what it did. A refusal the rules make (not enough tokens, a user
    /// gone, a hold settled) is part of the sequence.
    mutating func randomOperation() async throws -> String {
        let user = users.randomElement(using: &rng)!
        let pick = Int.random(in: 0..<30, using: &rng)
        do {
            return try await operation(pick, user: user)
        } catch let error as StoreError {
            return "operation \(pick) on \(user) refused: \(error.code)"
        }
    }

    /// Runs operation `pick` (0 to 29) on `user`; returns what it did.
    private mutating func operation(_ pick: Int, user: String) async throws -> String {
        let f = fixture
        switch pick {
        case 0, 1:
            try await f.run(.grant(userId: user, amount: Int64.random(in: 1...20, using: &rng), reason: "test"))
            return "grant to \(user)"
        case 2, 3:
            try await f.run(.performAction(userId: user, action: Self.charge, quotaLimit: nil))
            return "charge of \(user)"
        case 4, 5:
            try await f.run(.performAction(userId: user, action: Self.reading, quotaLimit: 2))
            return "quota action of \(user)"
        case 6:
            let hold = randomId("hold-")
            try await f.run(.createHold(userId: user, holdId: hold, amount: 5, expiresAt: now.addingTimeInterval(60)))
            holds[user, default: []].append(hold)
            return "hold \(hold) opened for \(user)"
        case 7:
            guard let hold = holds[user]?.popLast() else { return "no hold of \(user) to settle" }
            if Bool.random(using: &rng) {
                try await f.run(.captureHold(userId: user, holdId: hold, amount: 3))
                return "hold \(hold) captured"
            }
            try await f.run(.releaseHold(userId: user, holdId: hold))
            return "hold \(hold) released"
        case 8:
            f.clock.advance(by: 90)
            if Bool.random(using: &rng) {
                let expired = try await cached.expireHolds(now: now, limit: 100)
                return "clock advanced, expired holds released by the sweep: \(expired)"
            }
            try await f.run(.grant(userId: user, amount: 1, reason: "after expiry"))
            return "clock advanced, \(user)'s expired holds released by a grant"
        case 9, 10:
            let session = randomId("ses-"), refresh = f.refresh()
            _ = try await cached.openSession(userId: user, sessionId: session, refresh: refresh, sessionsPerUser: 3, now: now)
            (sessions[session], sessionUser[session]) = (refresh.hash, user)
            return "session \(session) opened for \(user)"
        case 11:
            guard let (session, hash) = sessions.randomElement(using: &rng) else { return "no session" }
            let next = f.refresh()
            do {
                _ = try await cached.rotateRefreshToken(hash: hash, next: next, now: now)
                sessions[session] = next.hash
                return "session \(session) refreshed"
            } catch let error as StoreError {
                return "session \(session) not refreshed: \(error.code)"
            }
        case 12, 13:
            guard let session = sessions.keys.randomElement(using: &rng) else { return "no session" }
            try await cached.revokeSession(id: session, now: now)
            return "session \(session) revoked"
        case 14:
            try await f.run(.setPremium(userId: user, until: Bool.random(using: &rng) ? now.addingTimeInterval(86_400) : nil))
            return "premium of \(user) changed"
        case 15:
            try await f.run(.updateProfile(userId: user, timezone: "Asia/Tokyo", language: "ja"))
            return "profile of \(user) changed"
        case 16, 17:
            documentCount += 1
            if Bool.random(using: &rng) {
                try await f.put(user, Collections.logs, "d\(documentCount % 5)", #"{"date":"2027-01-\#(10 + documentCount % 9)","n":\#(documentCount)}"#)
                return "document put for \(user)"
            }
            if Bool.random(using: &rng) {
                try await f.delete(user, Collections.logs, "d\(documentCount % 5)")
                return "document deleted for \(user)"
            }
            try await f.put(user, Collections.chat, randomId("m-"), #"{"sentAt":"t\#(documentCount)"}"#)
            return "metered document put for \(user)"
        case 18:
            let mutation = DocumentMutation(
                collection: Collections.logs, docId: "p\(documentCount % 3)", operation: .put(try json(#"{"date":"2027-01-20"}"#)))
            pushes += 1
            _ = try await cached.push(userId: user, clientId: "client-" + user, mutations: [ClientMutation(id: pushes, mutation: mutation)], now: now)
            return "push for \(user)"
        case 19:
            let purged = try await cached.purgeTombstones(before: now.addingTimeInterval(1), limit: 100)
            return "\(purged) tombstones purged"
        case 20:
            let transaction = AppStoreFacts.consumable(tokens: 7, for: user, purchased: now)
            _ = try await f.redeem(transaction, by: user)
            credited.append((transaction, user))
            return "consumable credited to \(user)"
        case 21:
            guard !credited.isEmpty else { return "nothing to refund" }
            let (transaction, owner) = credited.removeFirst()
            f.clock.advance(by: 1)
            _ = try await f.deliver(
                AppStoreFacts.notification(.refund, transaction.signed(at: now, revoked: now, percentage: 100), signed: now))
            return "consumable of \(owner) refunded"
        case 22:
            let account = linked.contains(user) ? user : linked.randomElement(using: &rng) ?? user
            let guest = try await newGuest()
            try await f.run(.grant(userId: guest, amount: 5, reason: "test"))
            try await f.put(guest, Collections.logs, "g", #"{"date":"2027-01-11"}"#)
            try await f.run(.createHold(userId: guest, holdId: randomId("hold-"), amount: 2, expiresAt: now.addingTimeInterval(600)))
            try await check("the guest to merge, prepared")
            _ = try await cached.merge(guestId: guest, into: account, now: now)
            return "guest \(guest) merged into \(account)"
        case 23:
            if linked.contains(user) {
                let keep = sessionUser.first { $0.value == user }?.key ?? "none"
                _ = try await cached.changePassword(userId: user, passwordHash: randomId("pw-"), keepingSession: keep, now: now)
                return "password of \(user) changed"
            }
            try await link(user)
            return "\(user) linked to an email"
        case 24:
            guard linked.contains(user) else { return "\(user) has no email to reset" }
            let code = randomId("code-")
            let purpose: AccountCodePurpose = Bool.random(using: &rng) ? .passwordReset : .emailVerification
            _ = try await cached.issueAccountCode(
                NewAccountCode(userId: user, purpose: purpose, hash: code, expiresAt: now.addingTimeInterval(600)), now: now)
            if purpose == .passwordReset {
                _ = try await cached.resetPassword(userId: user, codeHash: code, passwordHash: randomId("pw-"), policy: AccountCodePolicy(), now: now)
                return "password of \(user) reset"
            }
            _ = try await cached.verifyEmail(userId: user, codeHash: code, policy: AccountCodePolicy(), now: now)
            return "email of \(user) verified"
        case 25:
            let subject = randomId("sub-")
            if Bool.random(using: &rng) || !linked.contains(user) || apple.values.contains(user) {
                let session = randomId("ses-"), refresh = f.refresh()
                let grant = try await cached.signInWithApple(
                    AppleCredential(subject: subject, email: "a@example.com"), sessionId: session, refresh: refresh, sessionsPerUser: 3,
                    signupGrant: 10, now: now)
                track(grant.user.id)
                (sessions[session], sessionUser[session], apple[subject]) = (refresh.hash, grant.user.id, grant.user.id)
                return "\(grant.user.id) signed in with Apple"
            }
            _ = try await cached.linkApple(userId: user, credential: AppleCredential(subject: subject, email: "b@example.com"), now: now)
            apple[subject] = user
            return "Apple identity linked to \(user)"
        case 26:
            guard let (subject, owner) = apple.randomElement(using: &rng) else { return "no Apple identity" }
            let notice = AppleAccountNotice(id: randomId("jti-"), subject: subject, eventTime: now, keepUntil: now.addingTimeInterval(86_400))
            switch Int.random(in: 0..<3, using: &rng) {
            case 0:
                _ = try await cached.appleSignedIn(AppleCredential(subject: subject, email: "c@example.com"), now: now)
                return "Apple contact of \(owner) stored"
            case 1:
                _ = try await cached.revokeAppleConsent(notice, now: now)
                return "Apple consent of \(owner) revoked"
            default:
                apple[subject] = nil
                let outcome = try await cached.appleAccountDeleted(notice, now: now)
                return "Apple account of \(owner) deleted: \(String(describing: outcome))"
            }
        case 27:
            let audit = NewAuditEntry(at: now, operatorSession: "operator", action: "revoke_sessions", userId: user, before: nil, after: nil)
            let revoked = try await cached.revokeSessions(userId: user, audit: audit)
            return "console revoked \(revoked.count) sessions of \(user)"
        case 28:
            f.clock.advance(by: 3600)
            let deleted = try await cached.purgeSessions(before: now.addingTimeInterval(Double.random(in: 0...7_200, using: &rng)), limit: 100)
            return "clock advanced, \(deleted) sessions and tokens purged"
        default:
            guard users.count > 4, Int.random(in: 0..<3, using: &rng) == 0 else { return "no deletion" }
            let deleted = try await cached.deleteUser(id: user)
            return "\(user) deleted: \(deleted)"
        }
    }

    /// Runs each operation whose declaration a cache depends on at least once more, on a fresh guest, so that a short
    /// sequence still covers them all (the sequence itself covers them for the default seed, this makes it certain).
    mutating func coverEveryCachedDeclaration() async throws {
        let guest = try await newGuest()
        for pick in [0, 2, 4, 6, 7, 6, 8, 9, 12, 14, 15, 16, 16, 18, 19, 20, 21, 23, 22, 23, 24, 27, 28] {
            do {
                let done = try await operation(pick, user: guest)
                try await check("cover: \(done)")
            } catch let error as StoreError {
                try await check("cover: operation \(pick) refused: \(error.code)")
            }
        }
        for _ in 0..<2 {
            let code = randomId("code-")
            _ = try await cached.issueAccountCode(
                NewAccountCode(userId: guest, purpose: .passwordReset, hash: code, expiresAt: now.addingTimeInterval(600)), now: now)
            _ = try await cached.resetPassword(userId: guest, codeHash: code, passwordHash: randomId("pw-"), policy: AccountCodePolicy(), now: now)
            try await check("cover: password reset")
            let verify = randomId("code-")
            _ = try await cached.issueAccountCode(
                NewAccountCode(userId: guest, purpose: .emailVerification, hash: verify, expiresAt: now.addingTimeInterval(600)), now: now)
            _ = try await cached.verifyEmail(userId: guest, codeHash: verify, policy: AccountCodePolicy(), now: now)
            try await check("cover: email verified")
        }
        let subject = randomId("sub-")
        _ = try await cached.linkApple(userId: guest, credential: AppleCredential(subject: subject, email: "d@example.com"), now: now)
        try await check("cover: Apple linked")
        _ = try await cached.appleSignedIn(AppleCredential(subject: subject, email: "e@example.com"), now: now)
        try await check("cover: Apple contact")
        let at = now
        let notice = { AppleAccountNotice(id: randomId("jti-"), subject: subject, eventTime: at, keepUntil: at.addingTimeInterval(86_400)) }
        _ = try await cached.revokeAppleConsent(notice(), now: now)
        try await check("cover: Apple consent revoked")
        _ = try await cached.appleAccountDeleted(notice(), now: now)
        try await check("cover: Apple identity removed")
        let transaction = AppStoreFacts.consumable(tokens: 7, for: guest, purchased: now)
        _ = try await fixture.redeem(transaction, by: guest)
        try await check("cover: purchase")
        try await fixture.put(guest, Collections.logs, "tombstone", #"{"date":"2027-01-12"}"#)
        try await fixture.delete(guest, Collections.logs, "tombstone")
        fixture.clock.advance(by: 1)
        _ = try await cached.purgeTombstones(before: now, limit: 100)
        try await check("cover: tombstones purged")
        _ = try await cached.deleteUser(id: guest)
        try await check("cover: deletion")
    }

    // MARK: Setup

    /// A new guest (its installation, a session, a sign-up grant), tracked.
    @discardableResult
    mutating func newGuest() async throws -> String {
        let session = randomId("ses-"), refresh = fixture.refresh()
        let grant = try await fixture.signIn(signupGrant: 50, sessionId: session, refresh: refresh, sessionsPerUser: 3)
        track(grant.user.id)
        guests.insert(grant.user.id)
        (sessions[session], sessionUser[session]) = (refresh.hash, grant.user.id)
        return grant.user.id
    }

    /// Links `user` to a new email.
    mutating func link(_ user: String) async throws {
        _ = try await cached.linkCredentials(userId: user, email: randomId() + "@example.com", passwordHash: "hash")
        linked.insert(user)
        guests.remove(user)
    }

    /// Checks `user`'s answers from now on.
    mutating func track(_ user: String) { if !users.contains(user) { users.append(user) } }

    // MARK: The property

    /// How many checks found an answer in each cache.
    final class Hits: @unchecked Sendable, CustomStringConvertible {
        var accounts = 0, sessions = 0
        var description: String { "\(accounts) accounts and \(sessions) sessions answered from memory" }
    }
    let hits = Hits()

    /// Every answer the cached store's caches give equals an uncached read.
    func check(_ after: String) async throws {
        let context = "seed \(seed), after \(after)"
        for (session, _) in sessions.sorted(by: { $0.key < $1.key }) {
            if cached.sessions.user(of: session) != nil { hits.sessions += 1 }
            let answer = try await cached.liveSessionUser(sessionId: session)
            let truth = try await uncached.rows(
                "SELECT user_id FROM sessions WHERE id = \(session) AND revoked_at IS NULL"
            ).first.map { try Columns($0)["user_id"] as String }
            #expect(answer == truth, "\(context): session \(session) of \(sessionUser[session] ?? "?") is live for \(answer ?? "nobody") in the cache, for \(truth ?? "nobody") in the database")
        }
        for user in users {
            try await checkAccount(user, context)
            #expect(try await cached.wallet(userId: user, now: now) == uncached.wallet(userId: user, now: now), "\(context): wallet of \(user)")
            let query = DocumentRangeQuery(collection: Collections.logs.name, limit: 100)
            let page = try await cached.documents(userId: user, query: query)
            uncached.pages.forget([user])
            #expect(page == (try await uncached.documents(userId: user, query: query)), "\(context): documents of \(user)")
        }
    }

    /// The account as the compare-and-set cache holds it, if it does, against the database: the user row, the wallet
    /// and its stamp, the quota counters.
    func checkAccount(_ user: String, _ context: String) async throws {
        guard let entry = cached.accounts.account(user) else { return }
        hits.accounts += 1
        let wallet = try await uncached.rows("SELECT balance, held, version, xmin::text AS stamp FROM wallets WHERE user_id = \(user)").first
        guard let wallet = wallet.map(Columns.init) else {
            Issue.record("\(context): the cache holds \(user), whose account is gone")
            return
        }
        let stored = WalletState(balance: try wallet["balance"], held: try wallet["held"], version: try wallet["version"])
        #expect(entry.account.state.wallet == stored, "\(context): wallet of \(user) cached as \(entry.account.state.wallet), stored as \(stored)")
        #expect(entry.account.stamp == (try wallet["stamp"] as String), "\(context): wallet row of \(user) moved since it was cached")
        #expect(entry.account.state.user == (try await uncached.user(id: user)), "\(context): user row of \(user) changed since it was cached")
        var counters: [String: QuotaCounter] = [:]
        for row in try await uncached.rows("SELECT quota, used, window_end FROM quota_counters WHERE user_id = \(user)").map(Columns.init) {
            counters[try row["quota"]] = QuotaCounter(used: Int(try row["used"] as Int64), windowEnd: Date(millis: try row["window_end"]))
        }
        #expect(entry.account.state.counters == counters, "\(context): quota counters of \(user) cached as \(entry.account.state.counters), stored as \(counters)")
    }
}

/// Runs two stores on one fresh schema of the test database: `cached`, whose caches are under test (its pool alone:
/// no revocation poller, and its live sessions trusted for an hour from the start), and `uncached`, which reads.
private func withCachedAndUncachedStores(
    sourceLocation: SourceLocation = #_sourceLocation, _ body: (PostgresStore, PostgresStore) async throws -> Void
) async throws {
    let url = try postgresURL(sourceLocation: sourceLocation)
    let schema = "tally_test_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
    var logger = Logger(label: "tally.cache-property-tests")
    logger.logLevel = .warning
    func configuration() throws -> PostgresPool.Configuration {
        var configuration = try PostgresStore.configuration(url: url, maximumConnections: 3)
        configuration.connection.options.additionalStartupParameters.append(("search_path", schema))
        configuration.acquireTimeout = .seconds(60)
        return configuration
    }
    let cached = PostgresStore(configuration: try configuration(), logger: logger, sessionStaleness: .seconds(3600))
    let uncached = PostgresStore(configuration: try configuration(), logger: logger, sessionStaleness: .seconds(3600))
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { await cached.pool.run() }
        group.addTask { await uncached.pool.run() }
        do {
            try await cached.rows(PostgresQuery(unsafeSQL: "CREATE SCHEMA \(schema)"))
            try await cached.migrate()
            // Fresh as of now, and never polled again: only this process's own writes make it forget.
            cached.sessions.apply([], polledAt: cached.sessions.pollStart)
            try await body(cached, uncached)
        } catch {
            _ = try? await cached.rows(PostgresQuery(unsafeSQL: "DROP SCHEMA \(schema) CASCADE"))
            group.cancelAll()
            throw error
        }
        try await cached.rows(PostgresQuery(unsafeSQL: "DROP SCHEMA \(schema) CASCADE"))
        group.cancelAll()
    }
}
