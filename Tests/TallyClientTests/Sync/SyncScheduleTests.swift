import Foundation
import TallyAPI
import TallyTestKit
import Testing

@testable import TallyClient

/// The pure pieces of resuming sync: when sync and the event stream try again (``SyncSchedule``), what ends a wait
/// early (``SyncSchedule/ends(_:on:)``, ``Reachability``), the phase a status shows (``SyncActivity``), and the
/// premium a `wallet` event carries.
@Suite("Sync schedule, signs and phases", .timeLimit(.minutes(1)))
struct SyncScheduleTests {
    // MARK: The waits

    @Test("Without an answer, an active app checks again within 1.5 s however long the outage; in the background within 60 s")
    func unreachableCeilings() throws {
        for draw in [0, 0.25, 0.5, 0.999] {
            var total: TimeInterval = 0
            for failures in 1...200 {
                let active = try #require(SyncSchedule.wait(after: .unreachable, failures: failures, isActive: true, unitRandom: draw))
                #expect(active.kind == .unreachable)
                #expect(active.seconds <= 1.5, "failure \(failures), draw \(draw)")
                // Equal jitter: never less than half the ceiling, so an outage is never hammered.
                let ceiling = min(1.5, 0.25 * pow(2, Double(failures - 1)))
                #expect(active.seconds >= ceiling / 2 && active.seconds <= ceiling)
                total += active.seconds
                let background = try #require(SyncSchedule.wait(after: .unreachable, failures: failures, isActive: false, unitRandom: draw))
                #expect(background.seconds <= 60 && background.seconds >= min(60, pow(2, Double(failures - 1))) / 2)
            }
            // 200 checks take at least 200 × 0.75 s − the ramp: one a second or so, not a busy loop.
            #expect(total >= 140, "draw \(draw): \(total) s")
        }
        // The first checks come quickly: an outage of a moment costs a moment.
        #expect(SyncSchedule.wait(after: .unreachable, failures: 1, isActive: true, unitRandom: 0.5)?.seconds == 0.1875)
        #expect(SyncSchedule.wait(after: .unreachable, failures: 4, isActive: true, unitRandom: 0.5)?.seconds == 1.125)
    }

    @Test("A \"not now\" waits 1 s doubling to 60 s, never less than the server's Retry-After; a refusal does not wait")
    func busyAndRefused() throws {
        let first = try #require(SyncSchedule.wait(after: .busy(retryAfter: nil), failures: 1, isActive: true, unitRandom: 0.5))
        #expect(first.seconds == 0.5 && first.kind == .busy)
        let later = try #require(SyncSchedule.wait(after: .busy(retryAfter: nil), failures: 12, isActive: true, unitRandom: 0.999))
        #expect(later.seconds <= 60 && later.seconds > 59)
        let asked = try #require(SyncSchedule.wait(after: .busy(retryAfter: 30), failures: 1, isActive: true, unitRandom: 0.5))
        #expect(asked.seconds == 30 && asked.kind == .serverAsked)
        let longer = try #require(SyncSchedule.wait(after: .busy(retryAfter: 300), failures: 1, isActive: false, unitRandom: 0.5))
        #expect(longer.seconds == 300, "a Retry-After beyond the cap is still honoured")
        #expect(SyncSchedule.wait(after: .refused, failures: 1, isActive: true, unitRandom: 0.5) == nil)
    }

    @Test("Failures are sorted by what they say of the server")
    func failures() {
        let cases: [(ClientError, SyncSchedule.Failure)] = [
            (ClientError(.offline), .unreachable),
            (ClientError(.timedOut), .unreachable),
            (ClientError(.rateLimited, status: 429, retryAfter: 7), .busy(retryAfter: 7)),
            (ClientError(.server, status: 503), .busy(retryAfter: nil)),
            (ClientError(.server, status: 502, retryAfter: 2), .busy(retryAfter: 2)),
            (ClientError(.server, status: 408), .busy(retryAfter: nil)),
            (ClientError(.server, status: 403), .refused),
            (ClientError(.server, status: 410), .refused),
            (ClientError(.unauthorized, status: 401), .refused),
            (ClientError(.insufficientTokens, status: 402), .refused),
        ]
        for (error, expected) in cases { #expect(SyncSchedule.failure(error) == expected, "\(error.code) \(String(describing: error.status))") }
        #expect(SyncSchedule.failure(.transport(.connectionLost)) == .unreachable)
        #expect(SyncSchedule.failure(.status(429, code: "rate_limited", retryAfter: 3)) == .busy(retryAfter: 3))
        #expect(SyncSchedule.failure(.status(500, code: nil, retryAfter: nil)) == .busy(retryAfter: nil))
        #expect(SyncSchedule.failure(.status(404, code: nil, retryAfter: nil)) == .refused)
        for status in [200, 201, 304, 400, 401, 402, 404, 409, 410] { #expect(SyncSchedule.isAnswer(status: status), "\(status)") }
        for status in [408, 429, 500, 502, 503, 504] { #expect(!SyncSchedule.isAnswer(status: status), "\(status)") }
    }

    @Test("What ends which wait: anything ends an outage's, the server serving or the app coming forward a \"not now\", only sync.now() a Retry-After")
    func signsTable() {
        let endsBusy: Set<ServerSign> = [.streamConnected, .becameActive, .syncNow]
        for sign in ServerSign.allCases {
            #expect(SyncSchedule.ends(.unreachable, on: sign), "\(sign)")
            #expect(SyncSchedule.ends(.busy, on: sign) == endsBusy.contains(sign), "\(sign)")
            #expect(SyncSchedule.ends(.serverAsked, on: sign) == (sign == .syncNow), "\(sign)")
        }
        #expect(SyncSchedule.writeIsSign(sinceAttempt: nil))
        #expect(!SyncSchedule.writeIsSign(sinceAttempt: 0.999))
        #expect(SyncSchedule.writeIsSign(sinceAttempt: 1))
    }

    @Test("Equal jitter spans half the ceiling to the ceiling; full jitter, the default, 0 to the ceiling")
    func jitter() {
        let equal = RetryPolicy(maxAttempts: 10, baseDelay: 2, multiplier: 2, maxDelay: 8, jitter: .equal)
        #expect(equal.delay(afterAttempt: 1, failure: .transport(.offline), safeToRetry: true, unitRandom: 0) == 1)
        #expect(equal.delay(afterAttempt: 1, failure: .transport(.offline), safeToRetry: true, unitRandom: 1) == 2)
        #expect(equal.delay(afterAttempt: 5, failure: .transport(.offline), safeToRetry: true, unitRandom: 0) == 4)
        #expect(equal.delay(afterAttempt: 5, failure: .status(429, code: nil, retryAfter: 6), safeToRetry: true, unitRandom: 0) == 6)
        #expect(RetryPolicy().jitter == .full)
        #expect(RetryPolicy(baseDelay: 2).delay(afterAttempt: 1, failure: .transport(.offline), safeToRetry: true, unitRandom: 0) == 0)
    }

    // MARK: The phases

    @Test("A round's phases: syncing while answered, offline or waiting with when, idle when done; offline holds until an answer")
    func roundPhases() {
        let t = Date(timeIntervalSince1970: 1_800_000_000)
        var activity = SyncActivity()
        var changed: Bool
        #expect(activity.phase == .idle && !activity.working)
        changed = activity.apply(.attempting)
        #expect(changed && activity.phase == .syncing)
        changed = activity.apply(.answered)
        #expect(!changed, "already syncing")
        changed = activity.apply(.waiting(.unreachable, retryAt: t))
        #expect(changed && activity.phase == .offline && activity.retryAt == t)
        changed = activity.apply(.attempting)
        #expect(changed && activity.phase == .offline && activity.retryAt == nil, "offline until answered")
        changed = activity.apply(.waiting(.unreachable, retryAt: t + 1))
        #expect(changed && activity.retryAt == t + 1)
        changed = activity.apply(.attempting)
        #expect(changed)
        changed = activity.apply(.answered)
        #expect(changed && activity.phase == .syncing)
        changed = activity.apply(.waiting(.serverAsked, retryAt: t + 30))
        #expect(changed && activity.phase == .waitingToRetry && activity.retryAt == t + 30)
        changed = activity.apply(.attempting)
        #expect(changed && activity.phase == .syncing && activity.retryAt == nil)
        changed = activity.apply(.waiting(.busy, retryAt: t + 2))
        #expect(changed && activity.phase == .waitingToRetry)
        changed = activity.apply(.finished)
        #expect(changed && activity.phase == .idle && activity.retryAt == nil && !activity.working)
    }

    @Test("The stream's drop and return move the phase only between rounds")
    func streamPhases() {
        let t = Date(timeIntervalSince1970: 1_800_000_000)
        var idle = SyncActivity()
        var changed: Bool
        changed = idle.apply(.streamLost)
        #expect(changed && idle.phase == .offline && idle.retryAt == nil)
        changed = idle.apply(.streamLost)
        #expect(!changed)
        changed = idle.apply(.streamConnected)
        #expect(changed && idle.phase == .idle)
        changed = idle.apply(.streamConnected)
        #expect(!changed)

        var waiting = SyncActivity()
        waiting.apply(.attempting)
        waiting.apply(.waiting(.unreachable, retryAt: t))
        changed = waiting.apply(.streamConnected)
        #expect(!changed, "the round's own attempt says when it is back")
        #expect(waiting.phase == .offline && waiting.retryAt == t)
        var syncing = SyncActivity()
        syncing.apply(.attempting)
        changed = syncing.apply(.streamLost)
        #expect(!changed && syncing.phase == .syncing, "a push under way says for itself")
    }

    @Test("SyncStatus keeps isOffline (the phase) and isSyncing (a round under way, its waits included)")
    func statusCompatibility() {
        #expect(SyncStatus() == SyncStatus(phase: .idle))
        #expect(SyncStatus(isOffline: true).phase == .offline && !SyncStatus(isOffline: true).isSyncing)
        #expect(SyncStatus(isSyncing: true).phase == .syncing)
        let both = SyncStatus(isOffline: true, isSyncing: true)
        #expect(both.phase == .offline && both.isSyncing)
        // A round waiting to try again is still under way: "nothing pending and not syncing" means done.
        var status = SyncStatus(pendingMutations: 2, phase: .waitingToRetry, retryAt: Date(timeIntervalSince1970: 5))
        #expect(!status.isOffline && status.isSyncing)
        #expect(!SyncStatus(phase: .offline).isSyncing)  // the stream dropped between rounds
        status.isOffline = true
        #expect(status.phase == .offline)
        status.isOffline = false
        #expect(status.phase == .idle)
    }

    @Test("The engine's status says a round is under way through its failures and waits, and not after it ended")
    func statusFollowsTheRound() {
        var activity = SyncActivity()
        func status() -> SyncStatus { SyncStatus(phase: activity.phase, retryAt: activity.retryAt, isSyncing: activity.working) }
        activity.apply(.attempting)
        #expect(status().isSyncing)
        activity.apply(.waiting(.unreachable, retryAt: Date(timeIntervalSince1970: 1)))
        #expect(status().isOffline && status().isSyncing)
        activity.apply(.attempting)  // the reachability check, still offline
        #expect(status().isOffline && status().isSyncing)
        activity.apply(.finished)
        #expect(!status().isSyncing && status().phase == .idle)
    }

    // MARK: Premium on the wire

    @Test("A wallet event says premium as a date or null, and one without the field (an older server) says nothing")
    func walletEventPremium() throws {
        let wallet = #"{"wallet":{"available":1,"balance":1,"held":0,"version":2},"quotas":[]"#
        let decoder = TallyJSON.decoder()
        let old = try decoder.decode(SyncWalletEvent.self, from: Data((wallet + "}").utf8))
        #expect(!old.reportsPremium && old.premiumUntil == nil)
        let none = try decoder.decode(SyncWalletEvent.self, from: Data((wallet + #","premiumUntil":null}"#).utf8))
        #expect(none.reportsPremium && none.premiumUntil == nil)
        let until = Date(timeIntervalSince1970: 1_800_086_400)
        let made = SyncWalletEvent(wallet: old.wallet, quotas: [], premiumUntil: until)
        let data = try TallyJSON.encoder().encode(made)
        #expect(try decoder.decode(SyncWalletEvent.self, from: data) == made)
        let noneAgain = try TallyJSON.encoder().encode(SyncWalletEvent(wallet: old.wallet, quotas: []))
        #expect(String(decoding: noneAgain, as: UTF8.self).contains(#""premiumUntil":null"#))
        // What a client that predates the field decodes: the same wallet, the key ignored.
        struct OldEvent: Decodable, Equatable {
            var wallet: Wallet
            var quotas: [Quota]
        }
        #expect(try decoder.decode(OldEvent.self, from: data) == OldEvent(wallet: old.wallet, quotas: []))
    }

    // MARK: Reachability

    @Test("A sign ends the waits it ends and no other; one that came during the failed attempt ends the wait at once")
    func reachabilityWaits() async throws {
        let clock = ManualClock()
        let reachability = Reachability(clock: clock)
        // A sign that came after the attempt was sent (generation 0): the wait after its failure does not sleep.
        let sent = reachability.generation
        reachability.signal(.answered)
        #expect(try await reachability.wait(60, .unreachable, after: sent))
        #expect(clock.sleeperCount == 0)

        // A Retry-After wait: a write and an answer do not end it, sync.now() does.
        let asked = Task { try await reachability.wait(30, .serverAsked, after: reachability.generation) }
        try await clock.waitForSleepers(1)
        reachability.signal(.localWrite)
        reachability.signal(.answered)
        #expect(clock.sleeperCount == 1)
        reachability.signal(.syncNow)
        #expect(try await asked.value)
        #expect(clock.sleeperCount == 0, "the clock's sleep was cancelled")

        // A wait that nothing ends elapses on the clock.
        let elapsing = Task { try await reachability.wait(1.5, .busy, after: reachability.generation) }
        try await clock.waitForSleepers(1)
        reachability.signal(.localWrite)
        clock.advance(by: 1.5)
        #expect(try await !elapsing.value)

        // Cancelled: it throws, whatever finished first.
        let cancelled = Task { try await reachability.wait(60, .unreachable, after: reachability.generation) }
        try await clock.waitForSleepers(1)
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
    }
}
