import Synchronization
import TallyStore

/// The audit rows of grants and premium changes (admin API and console), appended in groups: a request waits until
/// its row is committed, but the rows of the requests waiting at the same time share one transaction
/// (``ConsoleStore/appendAudits(_:)``), so an audited grant costs one more row, not one more commit. Before this, each
/// grant's row was a transaction of its own: 10,000 admin grants took 1.6 s p50 on PostgreSQL under the load test's
/// set-up (0.67 s before the audit log), and each commit waited for the WAL's flush.
///
/// The first request to find no group under way writes the groups (each of at most ``maximumGroup`` rows) in a task
/// until none is waiting. A failed group fails its requests; the next group tries again.
final class AuditLog: Sendable {
    static let maximumGroup = 500

    private struct Waiting {
        var rows: [(NewAuditEntry, CheckedContinuation<Void, any Error>)] = []
        var writing = false
    }

    private let store: any ConsoleStore
    private let waiting = Mutex(Waiting())

    /// Rows go to `store`.
    init(store: any ConsoleStore) {
        self.store = store
    }

    /// Appends `entry`; returns once it is committed.
    func append(_ entry: NewAuditEntry) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let lead = waiting.withLock { waiting in
                waiting.rows.append((entry, continuation))
                guard !waiting.writing else { return false }
                waiting.writing = true
                return true
            }
            if lead { Task { await self.write(to: store) } }
        }
    }

    private func write(to store: any ConsoleStore) async {
        while true {
            let group = self.waiting.withLock { waiting in
                let group = Array(waiting.rows.prefix(Self.maximumGroup))
                waiting.rows.removeFirst(group.count)
                if group.isEmpty { waiting.writing = false }
                return group
            }
            guard !group.isEmpty else { return }
            do {
                try await store.appendAudits(group.map(\.0))
                for (_, continuation) in group { continuation.resume() }
            } catch {
                for (_, continuation) in group { continuation.resume(throwing: error) }
            }
        }
    }
}
