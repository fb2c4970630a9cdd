import HTTPTypes
import TallyStore

/// A call's `Server-Timing` header (W3C Server Timing): how long the gateway itself took and how long the
/// upstream did, so an app, a browser's developer tools or a benchmark sees what Tally adds to a provider's time.
///
/// - `gateway`: from the moment the body was read whole to the upstream request, plus — unstreamed — from the
///   upstream's last byte to the answer: the body's parse and checks, the hold, the capture. Neither upload
///   (client → Tally, Tally → provider) is in it.
/// - `upstream`: from the upstream request to the upstream's last byte (unstreamed) or its answer's head
///   (streamed): the upload to the provider and the provider's own time.
///
/// A duration, not a decision: read from `ContinuousClock` (nothing waits on it, so no injected clock).
struct GatewayTiming: Sendable {
    /// When the client's body had been read whole.
    let bodyRead: ContinuousClock.Instant
    /// When the upstream request began.
    var upstreamSent: ContinuousClock.Instant?
    /// When the upstream's answer had been read (whole, or its head for a stream).
    var upstreamDone: ContinuousClock.Instant?

    /// The header's value at `now`: `gateway;dur=<ms>, upstream;dur=<ms>`, one decimal.
    func value(at now: ContinuousClock.Instant) -> String {
        guard let sent = upstreamSent, let done = upstreamDone else { return "gateway;dur=\(Self.milliseconds(now - bodyRead))" }
        return "gateway;dur=\(Self.milliseconds((sent - bodyRead) + (now - done))), upstream;dur=\(Self.milliseconds(done - sent))"
    }

    /// `duration` in milliseconds with one decimal (`12.3`), never negative.
    static func milliseconds(_ duration: Duration) -> String {
        let tenths = max(0, Int64(saturating: duration / .microseconds(100), rounding: .down))
        return "\(tenths / 10).\(tenths % 10)"
    }
}

extension HTTPField.Name {
    /// `Server-Timing` (W3C): the gateway's and the upstream's time of an AI call (``GatewayTiming``).
    static let serverTiming = HTTPField.Name("Server-Timing")!
}
