import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import TallyAPI
import TallyStore

/// A streamed call: the upstream's Server-Sent Events relayed to the client as they arrive, its usage read
/// on the way (the usage chunk dropped unless the client asked for it), then the capture, and `tally.charge`.
struct StreamRelay: Sendable {
    let call: HeldCall
    let response: HTTPClientResponse
    let slot: CallSlot
    let controller: ChatCompletionsController

    /// Holds, calls the upstream, and answers with the stream once the upstream answered 200 (before that, a
    /// failure is an ordinary error response and the hold is released).
    static func start(_ chat: ChatRequest, slot: CallSlot, controller: ChatCompletionsController) async throws -> Response {
        let call: HeldCall
        let response: HTTPClientResponse
        var timing = GatewayTiming(bodyRead: chat.bodyRead)
        do {
            call = try await controller.hold(slot.userId, chat)
            timing.upstreamSent = .now
            response = try await controller.callUpstream(call)
            timing.upstreamDone = .now
        } catch {
            slot.end()
            throw error
        }
        let relay = StreamRelay(call: call, response: response, slot: slot, controller: controller)
        var headers = ServerSentEvents.headerFields
        headers[.serverTiming] = timing.value(at: .now)
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in try await relay.run(&writer) })
    }

    /// What the relay saw of the upstream's stream.
    struct Tally {
        var usage: ChatUsage?
        var generatedChunks = 0
        var done = false
        var failure: String?
        var clientGone = false
    }

    func run(_ writer: inout any ResponseBodyWriter) async throws {
        defer { slot.end() }
        var tally = Tally()
        var parser = EventStreamParser(limit: AIGatewayProtocol.maxUpstreamEventBytes)
        let deadline = controller.clock.now.addingTimeInterval(TimeInterval(controller.ai.configuration.upstream.timeout.components.seconds))
        // Dropping the iterator cancels the upstream request (the provider stops generating): done at once when the
        // client is gone or the stream failed, after reading to the end when it completed (the connection is reused).
        var upstream: HTTPClientResponse.Body.AsyncIterator? = response.body.makeAsyncIterator()
        do {
            // The head and the opening comment go out at once, before the model's first token: a device's URLSession
            // then shows the stream from its first chunk on, however short (``ServerSentEvents/opening``).
            do {
                try await writer.write(ByteBuffer(bytes: ServerSentEvents.opening))
            } catch {
                tally.clientGone = true
            }
            reading: while !tally.clientGone, let piece = try await upstream?.next() {
                // Re-framed events are at most the piece's bytes plus a space after each `data:`: one allocation.
                var out = ByteBufferAllocator().buffer(capacity: piece.readableBytes + 64)
                Self.relay(
                    piece.readableBytesView, parser: &parser, clientWantsUsage: call.chat.clientWantsUsage,
                    redaction: controller.ai.redaction, tally: &tally, into: &out)
                if out.readableBytes > 0 {
                    do {
                        try await writer.write(out)
                    } catch {
                        tally.clientGone = true
                        break reading
                    }
                }
                if tally.done || tally.failure != nil { break }
                if controller.clock.now > deadline {
                    tally.failure = "The model took longer than the gateway's timeout."
                    break
                }
            }
            if !tally.done, tally.failure == nil, !tally.clientGone { tally.failure = "The model's stream ended before [DONE]." }
        } catch {
            if !tally.clientGone { tally.failure = "The model's stream failed." }
        }
        if !tally.done { upstream = nil }
        // Settle before the last events: a client that hangs up at [DONE] is charged all the same. An upstream that
        // failed before generating anything is released whole, as a failure before the answer is.
        let failedEmpty = tally.failure != nil && tally.generatedChunks == 0 && tally.usage == nil && !tally.clientGone
        let charge = failedEmpty ? nil : controller.charge(call, usage: tally.usage, chunks: tally.generatedChunks)
        let report = await controller.settle(call, charge: charge, why: "upstream failed before answering")
        guard !tally.clientGone else { return }
        var tail: [UInt8] = []
        if let failure = tally.failure {
            let error = ChatErrorBody(message: failure, type: "upstream_error", code: ErrorCode.upstreamFailed.rawValue)
            tail += Array("data: ".utf8) + ServerSentEvents.json(error) + Array("\n\n".utf8)
        }
        if let report { tail += ServerSentEvents.event(AIGatewayProtocol.chargeEvent, data: ServerSentEvents.json(report)) }
        try? await writer.write(ByteBuffer(bytes: tail))
        try? await writer.finish(nil)
        // Read the upstream's answer to its end (it ends right after [DONE]), so its connection goes back to the pool.
        if tally.done { while (try? await upstream?.next()) != nil {} }
    }

    /// Relays one piece of the upstream's body: the events it completes (``EventStreamParser``, bounded at
    /// ``AIGatewayProtocol/maxUpstreamEventBytes``) added to `out` re-framed, what they say noted in `tally`. Nothing
    /// after `[DONE]` or a failure; an event beyond the parser's bound is a failure.
    static func relay(
        _ piece: some Sequence<UInt8>, parser: inout EventStreamParser, clientWantsUsage: Bool, redaction: KeyRedaction,
        tally: inout Tally, into out: inout ByteBuffer
    ) {
        do {
            try parser.feed(piece) { item in
                guard case .event(let event) = item, !tally.done, tally.failure == nil else { return }
                relay(event, clientWantsUsage: clientWantsUsage, redaction: redaction, tally: &tally, into: &out)
            }
        } catch {
            if !tally.done { tally.failure = "The model sent an event longer than the gateway relays (\(error.limit >> 20) MiB)." }
        }
    }

    /// Adds `event` to `out` unless it is the usage chunk the client did not ask for, and notes what it says in
    /// `tally` (`done` at `[DONE]`, a `failure` at an error from the upstream, its message's keys taken out).
    static func relay(
        _ event: EventStreamParser.Event, clientWantsUsage: Bool, redaction: KeyRedaction, tally: inout Tally, into out: inout ByteBuffer
    ) {
        let data = event.data
        if data == Self.done {
            tally.done = true
            out.writeStaticString("data: [DONE]\n\n")
            return
        }
        // Most chunks carry a delta and nothing else: found by a scan, without building the JSON.
        if !ChunkScan.mayCarryUsageOrError(data) {
            if ChunkScan.carriesGeneratedText(data) { tally.generatedChunks += 1 }
            write(event, to: &out)
            return
        }
        guard let chunk = try? JSONValue.parse(data) else {
            tally.failure = "The model sent an event that is not JSON."
            return
        }
        if let error = chunk["error"], error != .null {
            let message = error["message"]?.stringValue.map { String(redaction.redact($0).prefix(300)) }
            tally.failure = "The model failed: " + (message ?? "no message")
            return
        }
        let choices: [JSONValue]
        if case .array(let list)? = chunk["choices"] { choices = list } else { choices = [] }
        if let usage = ChatCompletionsController.usage(chunk["usage"]) {
            tally.usage = usage
            if choices.isEmpty && !clientWantsUsage { return }
        }
        if !choices.isEmpty, ChunkScan.carriesGeneratedText(data) { tally.generatedChunks += 1 }
        write(event, to: &out)
    }

    /// `event`'s data as one `data:` line per line of it, then the blank line that ends the event.
    static func write(_ event: EventStreamParser.Event, to out: inout ByteBuffer) {
        out.writeStaticString("data: ")
        if event.dataLines == 1 {
            out.writeBytes(event.data)
        } else {
            for (index, line) in event.data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
                if index > 0 { out.writeStaticString("\ndata: ") }
                out.writeBytes(line)
            }
        }
        out.writeStaticString("\n\n")
    }

    static let done = Array("[DONE]".utf8)
}

/// What a chunk's bytes say without parsing them (OpenAI and compatible servers write compact or lightly spaced JSON).
enum ChunkScan {
    /// Whether the chunk may carry a usage object or an error: those are parsed. (A `"usage":null` in every
    /// chunk, as OpenAI sends with `include_usage`, is not one.)
    static func mayCarryUsageOrError(_ bytes: [UInt8]) -> Bool {
        if find(errorKey, in: bytes) != nil { return true }
        var from = 0
        while let at = find(usageKey, in: bytes, from: from) {
            var index = at + usageKey.count
            while index < bytes.count, bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: ":") { index += 1 }
            if index < bytes.count, bytes[index] != UInt8(ascii: "n") { return true }
            from = index
        }
        return false
    }

    /// Whether the chunk carries text the model generated: a non-empty `"content"`, a tool call's `"name"` or
    /// `"arguments"`, a `"refusal"`, or the `"reasoning_content"` / `"reasoning"` some backends stream. Each such
    /// chunk counts as a completion token when no usage comes (a client gone mid-stream).
    static func carriesGeneratedText(_ bytes: [UInt8]) -> Bool {
        generatedKeys.contains { key in
            var from = 0
            while let at = find(key, in: bytes, from: from) {
                var index = at + key.count
                while index < bytes.count, bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: ":") { index += 1 }
                if index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\""), bytes[index + 1] != UInt8(ascii: "\"") { return true }
                from = index
            }
            return false
        }
    }

    private static let usageKey = Array("\"usage\"".utf8)
    private static let errorKey = Array("\"error\"".utf8)
    private static let generatedKeys = ["content", "arguments", "name", "refusal", "reasoning_content", "reasoning"].map { Array("\"\($0)\"".utf8) }

    private static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int = 0) -> Int? {
        guard needle.count <= haystack.count else { return nil }
        var index = start
        while index + needle.count <= haystack.count {
            if haystack[index] == needle[0], haystack[index..<(index + needle.count)].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }
}
