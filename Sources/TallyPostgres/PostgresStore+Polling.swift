import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
import TallyAPI
import TallyStore

/// What the listener's self-check and its fallback read and send (``PostgresNotifications/SelfCheck``,
/// ``ListenerFallbackPoller``): a probe's NOTIFY through the pool, the change markers of the users whose streams
/// are open, and the revocations each poll of the revocation feed finds.
extension PostgresStore {
    /// Sends `payload` on `channel` through the pool: another session than the listener's.
    func notify(channel: String, payload: String) async throws {
        try await rows("SELECT pg_notify(\(channel), \(payload))")
    }

    /// Each of `userIds`' change counter (`sync_state.version`) and wallet stamp (`xmin`), in one statement; a
    /// user without the row has `nil` there (no document yet; deleted).
    func changeMarkers(userIds: [String]) async throws -> [String: PolledChanges.Marker] {
        let rows = try await rows(
            """
            SELECT u.id, s.version, w.xmin::text AS stamp
            FROM unnest(\(userIds)::TEXT[]) AS u(id)
            LEFT JOIN sync_state s ON s.user_id = u.id
            LEFT JOIN wallets w ON w.user_id = u.id
            """)
        var markers: [String: PolledChanges.Marker] = [:]
        for row in rows {
            let row = Columns(row)
            markers[try row["id"]] = PolledChanges.Marker(documents: try row["version"], wallet: try row["stamp"])
        }
        return markers
    }

    /// Hands `handler` what each poll of the revocation feed (every second, whatever the listener hears) finds
    /// that the previous one did not: `sessionEnded` for a revoked session, `accountDeleted` for a deleted
    /// account — so that the owner ends their streams and forgets their tokens within a poll even when no
    /// notification arrives. The first poll hands over the feed's whole window.
    public func onRevocationsPolled(_ handler: @escaping @Sendable ([ChangeEvent]) -> Void) {
        sessions.observe { revocations in
            handler(
                revocations.map { revocation in
                    revocation.sessionId.map { .sessionEnded(userId: revocation.userId, sessionId: $0) }
                        ?? .accountDeleted(userId: revocation.userId)
                })
        }
    }
}

extension TallyClock {
    /// Runs `poll` every `interval` until the task is cancelled or the service group shuts down gracefully: how the
    /// revocation feed (``PostgresStore/followRevocations()``) and the listener's fallback (``ListenerFallbackPoller``)
    /// are polled. A failed poll changes nothing (the next one tries again); the tenth failure in a row is logged as
    /// `warning`, with the error without its values (``PostgresFailure``).
    func repeatPolling(every interval: TimeInterval, logger: Logger, warning: Logger.Message, _ poll: () async throws -> Void) async {
        var failures = 0
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                try await poll()
                failures = 0
            } catch {
                failures += 1
                if failures == 10 { logger.warning(warning, metadata: ["error": "\(PostgresFailure(error))"]) }
            }
            try? await cancelWhenGracefulShutdown { try await self.sleep(for: interval) }
        }
    }
}
