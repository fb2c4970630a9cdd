import Foundation

/// Sync on demand (``Client/sync``): a handle holding only the client.
///
/// The client syncs by itself: every write is pushed at once, the server's changes are pulled when its event
/// stream says so, and after an outage the outbox goes as soon as the server answers again. ``now()`` is for the
/// moments an app must know: before showing "all saved", before a sign-out, in a test.
public struct SyncClient: Sendable {
    let client: Client

    /// Sends every local change made so far and pulls the server's, now, like Firestore's `waitForPendingWrites`:
    /// ends any wait the sync is in (a backoff after an outage, even a server's `Retry-After`: this asks once), pushes
    /// the whole outbox and pulls, and returns once nothing is left to push and a pull made after the call has
    /// completed. Writes made while it runs are included; a change the server refuses (a conflict, a rejection) is
    /// rolled back and reported on ``Client/syncEvents`` as usual, and does not make it throw.
    ///
    /// ```swift
    /// try await tally.sync.now()   // everything written so far is on the server
    /// ```
    ///
    /// Throws what stopped it: ``ClientError/Code/offline`` or ``ClientError/Code/timedOut`` when the server could
    /// not be reached (the client keeps trying by itself, and the changes stay on the device), the server's refusal
    /// (``ClientError/Code/rateLimited``, a 5xx, ``ClientError/Code/unauthorized`` when the session is gone or the
    /// user signs out meanwhile), `CancellationError` when the calling task is cancelled. Without synced
    /// collections (``ClientConfiguration/collections``) it returns at once; with no user signed in it throws
    /// ``ClientError/Code/unauthorized``.
    public func now() async throws {
        try await client.syncHost.syncNow()
    }
}
