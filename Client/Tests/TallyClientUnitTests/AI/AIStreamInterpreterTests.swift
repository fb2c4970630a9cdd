import Foundation
import TallyAPI
import Testing

@testable import TallyClient

/// What the gateway's events of a streamed call mean, without a network: every way a stream ends.
@Suite("AI stream events", .timeLimit(.minutes(1)))
struct AIStreamInterpreterTests {
    static let wallet = Wallet(balance: 93, held: 0, version: 4)
    static let charge = AICharge(charged: 7, held: 20, promptTokens: 12, completionTokens: 5, wallet: wallet)

    /// The events `text` parses into, fed in pieces of `piece` bytes (as a network may deliver them).
    static func events(_ text: String, piece: Int = 7) -> [ServerSentEvent] {
        // Short test streams: never beyond the parser's bound, so `try!` cannot fire.
        var parser = EventStreamParser()
        let bytes = Array(text.utf8)
        return stride(from: 0, to: bytes.count, by: piece).flatMap { try! parser.feed(bytes[$0..<min($0 + piece, bytes.count)]) }
    }

    static func read(_ text: String) -> (events: [AIStreamEvent], interpreter: AIStreamInterpreter) {
        var interpreter = AIStreamInterpreter()
        let events = Self.events(text).compactMap { interpreter.read($0) }
        return (events, interpreter)
    }

    @Test("A whole answer: one event per chunk with text, the finish reason, then the charge; role-only chunks and [DONE] hand nothing")
    func wholeAnswer() {
        let text = "data: \(AIStubs.chunk(nil))\n\ndata: \(AIStubs.chunk("Hello"))\n\ndata: \(AIStubs.chunk(", world"))\n\n"
            + "data: \(AIStubs.chunk("", finish: "stop"))\n\ndata: [DONE]\n\n" + AIStubs.chargeEvent(Self.charge)
        let (events, interpreter) = Self.read(text)
        #expect(events == [
            AIStreamEvent(content: "Hello"), AIStreamEvent(content: ", world"), AIStreamEvent(finishReason: "stop"),
            AIStreamEvent(charge: Self.charge),
        ])
        #expect(interpreter.ending == .complete && interpreter.done && interpreter.charge == Self.charge)
    }

    @Test("The usage chunk a request asked for is its own event")
    func usage() {
        let usage = #"{"id":"c","object":"chat.completion.chunk","created":1,"model":"chat","choices":[],"#
            + #""usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}"#
        let (events, _) = Self.read("data: \(usage)\n\ndata: [DONE]\n\n")
        #expect(events == [AIStreamEvent(usage: ChatUsage(promptTokens: 12, completionTokens: 5))])
    }

    @Test("A failure after the 200: the text so far, the charge, then the gateway's error carrying the wallet after the charge")
    func failedMidStream() {
        let error = AIStubs.json(ChatErrorBody(message: "The model's stream failed.", type: "upstream_error", code: "upstream_failed"))
        let (events, interpreter) = Self.read("data: \(AIStubs.chunk("Once"))\n\ndata: \(error)\n\n" + AIStubs.chargeEvent(Self.charge))
        #expect(events == [AIStreamEvent(content: "Once"), AIStreamEvent(charge: Self.charge)])
        guard case .failed(let failure) = interpreter.ending else {
            Issue.record("expected a failure, got \(interpreter.ending)")
            return
        }
        #expect(failure.code == .server && failure.serverCode == .upstreamFailed && failure.wallet == Self.wallet)
        #expect(failure.message == "The model's stream failed.")
    }

    @Test("A body that ends with neither [DONE] nor the charge was cut; [DONE] without the charge is a whole answer")
    func cut() {
        #expect(Self.read("data: \(AIStubs.chunk("Once"))\n\n").interpreter.ending == .cut)
        #expect(Self.read("").interpreter.ending == .cut)
        #expect(Self.read("data: \(AIStubs.chunk("Once"))\n\ndata: [DONE]\n\n").interpreter.ending == .complete)
    }

    @Test("What is not understood is skipped: comments, unknown events, data that is not a chunk, a charge that does not decode")
    func lenient() {
        let text = ": keep-alive\n\nevent: other\ndata: {}\n\ndata: not json\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n"
            + "event: tally.charge\ndata: {\"charged\":\"lots\"}\n\ndata: [DONE]\n\n"
        let (events, interpreter) = Self.read(text)
        #expect(events == [AIStreamEvent(content: "Hi")])  // a chunk missing its id, model and index still shows its text
        #expect(interpreter.charge == nil && interpreter.ending == .complete)
    }
}
