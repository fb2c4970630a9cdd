import TallyStore

/// How the other processes' change events and revocations reach this process.
public enum EventDelivery: Sendable, Equatable {
    /// Heard over `LISTEN`, as they are published.
    case listening
    /// Read from the database every ``ListenerFallbackPoller/defaultInterval``: the listener is not known to hear.
    case polling
}

/// Decides, from the listener's probes, whether this process hears notifications or must poll. Pure: the
/// listener (``PostgresNotifications``) sends each probe, waits on its clock and reports; this only decides.
///
/// A probe is a NOTIFY to the listener's own origin, sent through the pool (another session than the
/// listener's), expected back within ``PostgresNotifications/probeTimeout``. A `LISTEN` behind a transaction
/// pooler is accepted and then hears nothing (the pooler drops what arrives while the listener's client is
/// not linked to the backend that listened), so only hearing proves it works.
///
/// - Delivery starts as ``EventDelivery/polling`` and turns to listening when a probe is heard: a process
///   never trusts a listener it has not heard, so its streams never go quiet waiting for the first verdict.
/// - A probe not heard in time while listening turns delivery to polling; the first miss of an episode is
///   to be reported (one error), later ones are not.
/// - A listener that lost its connection polls until a probe on the next connection is heard (its own
///   warning says why; no error here). A probe sent on a connection since lost decides nothing.
/// - Only the probe in flight counts: one heard after its deadline is ignored (no flapping on a slow database).
public struct ListenerSelfCheck: Sendable, Equatable {
    /// What the listener must do after an input.
    public enum Action: Sendable, Equatable {
        /// Poll from now on; `report`: log the error naming the likely cause and the setting to change.
        case startPolling(report: Bool)
        /// Listen again (stop polling); `recovered`: an error was reported for this episode, so say it ended.
        case stopPolling(recovered: Bool)
    }

    /// How events reach this process now.
    public private(set) var delivery: EventDelivery = .polling
    /// The probe sent and not yet heard nor timed out.
    private(set) var outstanding: UInt64?
    /// Probes sent so far (each one's number is the count at its sending).
    public private(set) var probesSent: UInt64 = 0
    /// Whether the current episode of polling was reported (an error logged).
    private var reported = false

    /// Starts polling, with no probe sent.
    public init() {}

    /// A probe is about to be sent on the listener's connection now listening: its number, to put in its payload.
    public mutating func probeSent() -> UInt64 {
        probesSent += 1
        outstanding = probesSent
        return probesSent
    }

    /// Probe `probe` could not be sent (the pool failed): it decides nothing.
    public mutating func probeFailed(_ probe: UInt64) {
        if outstanding == probe { outstanding = nil }
    }

    /// The listener heard probe `probe`.
    public mutating func heard(_ probe: UInt64) -> Action? {
        guard outstanding == probe else { return nil }
        outstanding = nil
        guard delivery == .polling else { return nil }
        delivery = .listening
        defer { reported = false }
        return .stopPolling(recovered: reported)
    }

    /// Probe `probe`'s deadline passed.
    public mutating func timedOut(_ probe: UInt64) -> Action? {
        guard outstanding == probe else { return nil }
        outstanding = nil
        guard delivery == .listening || !reported else { return nil }
        let report = !reported
        (delivery, reported) = (.polling, true)
        return .startPolling(report: report)
    }

    /// The listener's connection ended (it reconnects): whatever was in flight is lost, and events are polled
    /// until a probe on the next connection is heard.
    public mutating func listenerLost() -> Action? {
        outstanding = nil
        guard delivery == .listening else { return nil }
        delivery = .polling
        return .startPolling(report: false)
    }
}

/// Turns what a poll read into change events for the streams this process serves (``ListenerFallbackPoller``).
/// Pure. Each watched user's marker — the change counter of their documents (`sync_state.version`) and the
/// wallet row's version stamp (`xmin`, which every wallet, quota or premium write moves) — is compared with the
/// one the last poll read: a newer counter is a `documents` event, another stamp a `wallet` event.
///
/// A user seen for the first time (polling just started, or their first stream just opened) is announced as
/// both: a stream opened since the last poll read its state before that poll, and something may have changed
/// in between. Events are hints, so an announcement too many costs one read, while one too few leaves a
/// stream quiet. Users no longer watched are forgotten (memory follows the open streams).
public struct PolledChanges: Sendable, Equatable {
    /// What one poll reads for one user; `nil` where the user has no such row (no document yet, deleted).
    public struct Marker: Sendable, Equatable {
        /// `sync_state.version`.
        public var documents: Int64?
        /// The wallet row's `xmin`, as text.
        public var wallet: String?

        /// A marker.
        public init(documents: Int64?, wallet: String?) {
            (self.documents, self.wallet) = (documents, wallet)
        }
    }

    private var seen: [String: Marker] = [:]

    /// Nothing seen yet.
    public init() {}

    /// The events `read` (markers of the users watched when the poll began) announces, remembering it.
    public mutating func events(from read: [String: Marker]) -> [ChangeEvent] {
        var events: [ChangeEvent] = []
        for (user, marker) in read.sorted(by: { $0.key < $1.key }) {
            let before = seen[user]
            if let version = marker.documents, version > 0, before == nil || version > (before?.documents ?? 0) {
                events.append(.documents(userId: user, version: version))
            }
            if before == nil || marker.wallet != before?.wallet { events.append(.wallet(userId: user)) }
        }
        seen = read
        return events
    }

    /// Forgets every marker: the next poll announces every watched user (polling starts again).
    public mutating func reset() { seen = [:] }
}
