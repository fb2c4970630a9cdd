import Foundation
import Logging
import ServiceLifecycle
import TallyAPI
import TallyStore

/// Releases expired holds of every account; deletes old idempotency, sign-up and sign-in failure records,
/// ended sessions with their refresh tokens, tombstones of deleted documents past their retention, and Sign in with
/// Apple's used identity tokens and notification ids once they expire.
///
/// Requests already release a caller's own expired holds before touching the wallet; this sweep makes
/// sure holds of idle accounts are released too. Several instances may sweep at once safely. It sweeps
/// every `interval` of its clock's time (tests advance a ``ManualClock`` instead of waiting).
struct Housekeeping: Service {
    let store: any TallyStorage
    let clock: any TallyClock
    let interval: Duration
    let logger: Logger
    /// Opened once migrations have run.
    let ready: StartupGate
    /// How long tombstones of deleted documents are kept (`tombstoneRetentionDays`); a pull cursor older
    /// than the newest one purged gets `410 resync_required`.
    var tombstoneRetention: TimeInterval = SyncConfiguration().tombstoneRetention
    /// Told whose holds expired (their wallets changed).
    var notifier: (any ChangeNotifier)?

    /// Idempotency records are kept 48 hours (clients are promised at least 24).
    static let idempotencyRetention: Double = 48 * 3600
    /// Revoked sessions, and refresh tokens (used or not), are kept a day past their revocation or expiry.
    /// A used token is thus kept as long as it could be presented — until it expires — so presenting it
    /// again is still caught as reuse and revokes its session; after that it would be refused as expired
    /// anyway. A session goes once it is revoked, or once its last refresh token expired (its access tokens,
    /// shorter-lived, are long expired by then). The day also covers sign-in failures (lockout windows are
    /// at most a day).
    static let sessionRetention: Double = 24 * 3600

    /// One sweep: expire holds, purge old records. Returns the number of holds released.
    func sweep() async throws -> Int {
        let now = clock.now
        var released = 0
        // Batches of 100 accounts; bounded so one sweep cannot run forever behind a flood of holds.
        for _ in 0..<100 {
            let batch = try await store.expireHolds(now: now, limit: 100)
            released += batch.values.reduce(0, +)
            for userId in batch.keys { notifier?.walletChanged(userId: userId) }
            if batch.isEmpty { break }
        }
        try await store.purge(
            idempotencyBefore: now.addingTimeInterval(-Self.idempotencyRetention), signupsBefore: now.addingTimeInterval(-7200),
            signInFailuresBefore: now.addingTimeInterval(-Self.sessionRetention))
        // Batches of 500 rows; at most 20 a sweep, so one sweep stays short behind a backlog.
        for _ in 0..<20 {
            let purged = try await store.purgeSessions(before: now.addingTimeInterval(-Self.sessionRetention), limit: 500)
            if purged == 0 { break }
        }
        for _ in 0..<20 {
            let purged = try await store.purgeTombstones(before: now.addingTimeInterval(-tombstoneRetention), limit: 500)
            if purged == 0 { break }
        }
        // Sync clients idle as long: a device silent past the retention pulls from scratch anyway (its cursor is
        // older than the tombstones purged), and its forgotten client id no longer counts in its user's budget.
        for _ in 0..<20 {
            let purged = try await store.purgeClients(before: now.addingTimeInterval(-tombstoneRetention), limit: 500)
            if purged == 0 { break }
        }
        // Sign in with Apple's replay records: identity tokens past their expiry, notification ids past their age window
        // (the verifier refuses both by then).
        for _ in 0..<20 {
            let purged = try await store.purgeAppleRecords(now: now, limit: 500)
            if purged == 0 { break }
        }
        // App Attest's challenges past their five minutes (few: they are rate limited per address).
        _ = try await store.purgeAttestationChallenges(now: now)
        return released
    }

    func run() async throws {
        await ready.wait()
        var failing = false
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                let released = try await sweep()
                if released > 0 { logger.debug("expired holds released", metadata: ["count": "\(released)"]) }
                failing = false
            } catch {
                // Once per run of failures (a database outage fails every sweep until it ends).
                if !failing { logger.warning("housekeeping sweep failed", metadata: ["error": "\(error)"]) }
                failing = true
            }
            try? await cancelWhenGracefulShutdown { try await clock.sleep(for: interval / .seconds(1)) }
        }
    }
}

/// A one-shot signal: services that need the schema wait on it; start-up opens it after migrating.
final class StartupGate: Sendable {
    private let stream: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() { (stream, continuation) = AsyncStream.makeStream(of: Void.self) }

    /// Lets every waiter (present and future) through.
    func open() { continuation.finish() }

    /// Returns once ``open()`` was called, or the task is cancelled.
    func wait() async { for await _ in stream {} }
}
