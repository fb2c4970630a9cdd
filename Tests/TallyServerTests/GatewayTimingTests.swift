import Testing

@testable import TallyServer

@Suite("Gateway timing (Server-Timing)", .timeLimit(.minutes(1)))
struct GatewayTimingTests {
    @Test("An unstreamed call: the gateway's time is both sides of the upstream's; neither upload is in it")
    func unstreamed() {
        let start = ContinuousClock.now
        let timing = GatewayTiming(
            bodyRead: start, upstreamSent: start.advanced(by: .milliseconds(3)),
            upstreamDone: start.advanced(by: .milliseconds(503)))
        #expect(timing.value(at: start.advanced(by: .microseconds(505_500))) == "gateway;dur=5.5, upstream;dur=500.0")
    }

    @Test("Before the upstream is called, all of the time is the gateway's")
    func beforeUpstream() {
        let start = ContinuousClock.now
        #expect(GatewayTiming(bodyRead: start).value(at: start.advanced(by: .microseconds(1_234))) == "gateway;dur=1.2")
    }

    @Test("Milliseconds: one decimal, truncated; never negative")
    func milliseconds() {
        #expect(GatewayTiming.milliseconds(.zero) == "0.0")
        #expect(GatewayTiming.milliseconds(.microseconds(99)) == "0.0")
        #expect(GatewayTiming.milliseconds(.microseconds(100)) == "0.1")
        #expect(GatewayTiming.milliseconds(.seconds(61) + .microseconds(2_950)) == "61002.9")
        #expect(GatewayTiming.milliseconds(.milliseconds(-5)) == "0.0")
    }
}
