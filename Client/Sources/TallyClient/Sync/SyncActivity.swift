import Foundation

/// The sync engine's phase (``SyncStatus/Phase``) and when it next tries, moved only by ``apply(_:)``: a pure state
/// machine, so every transition is a test away.
///
/// A round (``working``) runs from its first attempt until nothing is left to do, through its failures and waits;
/// while one runs, only its own outcomes move the phase. The event stream's drop and return move it only between
/// rounds: a stream that drops while a push is under way says nothing the push will not say itself.
struct SyncActivity: Sendable, Hashable {
    /// What happened.
    enum Event: Sendable, Hashable {
        /// A push, pull or reachability check is being sent.
        case attempting
        /// It was answered.
        case answered
        /// An attempt failed: the next is at `retryAt`, after a wait of `kind`.
        case waiting(SyncWait, retryAt: Date)
        /// The round ended: nothing left to do, or refused for good (it waits for the next trigger).
        case finished
        /// The event stream dropped.
        case streamLost
        /// The event stream connected.
        case streamConnected
    }

    private(set) var phase: SyncStatus.Phase = .idle
    private(set) var retryAt: Date?
    /// Whether a round is under way (attempting, or waiting to attempt again).
    private(set) var working = false

    /// Moves to the state after `event`; returns whether the phase or `retryAt` changed.
    @discardableResult
    mutating func apply(_ event: Event) -> Bool {
        let before = (phase, retryAt)
        switch event {
        case .attempting:
            working = true
            retryAt = nil
            // Offline stays offline until an answer comes: the attempt may fail the same way.
            if phase != .offline { phase = .syncing }
        case .answered:
            working = true
            (phase, retryAt) = (.syncing, nil)
        case .waiting(let kind, let at):
            working = true
            (phase, retryAt) = (kind == .unreachable ? .offline : .waitingToRetry, at)
        case .finished:
            working = false
            (phase, retryAt) = (.idle, nil)
        case .streamLost:
            if !working, phase == .idle { phase = .offline }
        case .streamConnected:
            if !working, phase == .offline { (phase, retryAt) = (.idle, nil) }
        }
        return before != (phase, retryAt)
    }
}
