import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import TallyAPI
import TallyStore

/// What keeps this process's event streams going while the listener does not hear (``ListenerSelfCheck``):
/// every ``interval``, while delivery is ``EventDelivery/polling`` and a stream is open, one statement reads the
/// change markers of the users whose streams are open (``PostgresStore/changeMarkers(userIds:)``) and
/// ``PolledChanges`` turns what moved into change events for `deliver` — the same hints a notification would
/// have carried, at most an interval (plus the read) late. Sign-outs and deletions need no poll of their own:
/// the revocation feed is polled every second anyway (``PostgresStore/onRevocationsPolled(_:)``).
public final class ListenerFallbackPoller: Service, Sendable {
    /// The bound on how late a polled event is, plus one read: 1 s, the revocation feed's pace.
    public static let defaultInterval: TimeInterval = 1

    private struct State {
        var delivery: EventDelivery = .polling
        var changes = PolledChanges()
    }

    private let store: PostgresStore
    private let clock: any TallyClock
    private let logger: Logger
    private let watched: @Sendable () -> [String]
    private let deliver: @Sendable ([ChangeEvent]) -> Void
    private let state = Mutex(State())
    /// Between polls, on `clock`.
    public let interval: TimeInterval

    /// A poller reading through `store` for the users `watched` names (those with a stream open here) and handing
    /// the events it finds to `deliver`. It polls from the start, until told ``EventDelivery/listening``.
    public init(
        store: PostgresStore, clock: any TallyClock, interval: TimeInterval = ListenerFallbackPoller.defaultInterval, logger: Logger,
        watched: @escaping @Sendable () -> [String], deliver: @escaping @Sendable ([ChangeEvent]) -> Void
    ) {
        (self.store, self.clock, self.interval, self.logger) = (store, clock, interval, logger)
        (self.watched, self.deliver) = (watched, deliver)
    }

    /// How events reach this process now.
    public var delivery: EventDelivery { state.withLock { $0.delivery } }

    /// Polls from now on, or stops; polling afresh announces every watched user once (``PolledChanges/reset()``).
    public func set(_ delivery: EventDelivery) {
        state.withLock { state in
            if state.delivery != delivery { state.changes.reset() }
            state.delivery = delivery
        }
    }

    /// Polls every ``interval`` while delivery is polling, until the task is cancelled or the service group
    /// shuts down gracefully. A failed read (the database down) changes nothing: the next one tries again.
    public func run() async {
        await clock.repeatPolling(every: interval, logger: logger, warning: "postgres: polling for events keeps failing") {
            if state.withLock({ $0.delivery }) == .polling { try await poll() }
        }
    }

    /// One poll: the watched users' markers, compared with the last poll's (nothing is read with no stream open).
    func poll() async throws {
        let users = watched()
        guard !users.isEmpty else {
            state.withLock { $0.changes.reset() }
            return
        }
        let markers = try await store.changeMarkers(userIds: users)
        let events = state.withLock { state in
            // Listening again meanwhile: the listener carries the events now.
            state.delivery == .polling ? state.changes.events(from: markers) : []
        }
        if !events.isEmpty { deliver(events) }
    }
}
