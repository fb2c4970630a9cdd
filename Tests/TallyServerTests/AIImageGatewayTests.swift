import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import TallyAPI
@testable import TallyServer
import TallyStore
import Testing

/// Image parts through the AI gateway of a real server on both stores, against ``ImageUpstream`` (a provider that
/// reports the usage a test chooses and keeps what it was sent): each image held at exactly the documented rule and
/// charged the upstream's usage, every refusal with no upstream call and nothing held, a cancelled stream charged its
/// images' tokens and never above the hold, the data URL forwarded byte for byte.
@Suite("AI gateway: image parts", .timeLimit(.minutes(4)))
struct AIImageGatewayTests {
    /// OpenAI's tile rule (GPT-4o mini's prices), 1 credit a token, so a hold is its token count.
    static let vision = AIModelSpec(
        name: "vision", upstreamModel: "up-vision", promptTokensPerCredit: 1, completionTokensPerCredit: 1, maxCompletionTokens: 50,
        images: AIImageRule(maxBytes: 1 << 20))
    /// The patch rule (GPT-4.1 mini's), `low` priced as `high`; https images from one host.
    static let patches = AIModelSpec(
        name: "patches", upstreamModel: "up-patches", promptTokensPerCredit: 1, completionTokensPerCredit: 1, maxCompletionTokens: 50,
        images: AIImageRule(
            sizing: .patches(patchSize: 32, maxPatches: 1536, multiplier: 1.62), lowDetailTokens: nil, allowedURLHosts: ["images.example.com"]))
    /// A model without images.
    static let text = AIModelSpec(name: "text", promptTokensPerCredit: 1, completionTokensPerCredit: 1, maxCompletionTokens: 50)
    /// The completion cap every question asks for.
    static let cap = 20

    /// A server on `kind` whose gateway calls a fresh ``ImageUpstream``.
    static func with<T: Sendable>(
        _ kind: StoreKind, maxRequestBytes: Int = 25_165_824, bytesInFlight: Int = 268_435_456,
        _ body: @Sendable (LiveServer, ImageUpstream) async throws -> T
    ) async throws -> T {
        try await ImageUpstream.with { upstream, port in
            try await LiveServer.with(kind, configure: { configuration in
                configuration.ai = AIConfiguration(
                    upstream: AIUpstream(baseURL: "http://127.0.0.1:\(port)/v1", apiKey: nil), models: [Self.vision, Self.patches, Self.text],
                    maxConcurrentPerUser: 64, maxRequestBytes: maxRequestBytes, requestBytesInFlight: bytesInFlight)
            }) { server in try await body(server, upstream) }
        }
    }

    /// An image part: `{"type":"image_url","image_url":{"url":…,"detail":…}}`.
    static func imagePart(_ url: String, detail: String? = nil) -> JSONValue {
        var image: [JSONKey: JSONValue] = ["url": .string(url)]
        if let detail { image["detail"] = .string(detail) }
        return .object(["type": .string("image_url"), "image_url": .object(image)])
    }

    /// A question about `parts` to `model`, as a body.
    static func question(_ model: String, _ parts: [JSONValue], stream: Bool = false, text: String = "What is in this picture?") -> [JSONKey: JSONValue] {
        var body: [JSONKey: JSONValue] = [
            "model": .string(model), "max_tokens": .int(cap),
            "messages": .array([.object(["role": .string("user"), "content": .array([.object(["type": .string("text"), "text": .string(text)])] + parts)])]),
        ]
        if stream { body["stream"] = .bool(true) }
        return body
    }

    /// The text's byte bound of a question (its image parts left out), as the documentation defines it.
    static func textBound(_ text: String = "What is in this picture?") -> Int {
        PromptBound.tokens(request: question("any", [], text: text))
    }

    /// OpenAI's tile rule as its documentation states it, in floating point: `low` 85; else fit within 2048², then the
    /// shortest side to 768, and 85 + 170 a 512-px tile.
    static func tileTokens(_ width: Int, _ height: Int, detail: String?) -> Int {
        if detail == "low" { return 85 }
        var (w, h) = (Double(width), Double(height))
        if max(w, h) > 2048 { (w, h) = (w * 2048 / max(w, h), h * 2048 / max(w, h)) }
        if min(w, h) > 768 { (w, h) = (w * 768 / min(w, h), h * 768 / min(w, h)) }
        return 85 + 170 * Int((w / 512).rounded(.up)) * Int((h / 512).rounded(.up))
    }

    /// OpenAI's patch rule as documented: 32-px patches; beyond 1536, scaled by √(32² × 1536 / (w × h)) lowered until
    /// a side holds whole patches; times 1.62, rounded up (`low` as `high`: no price of its own).
    static func patchTokens(_ width: Int, _ height: Int) -> Int {
        let (w, h) = (Double(width), Double(height))
        var patches = (w / 32).rounded(.up) * (h / 32).rounded(.up)
        if patches > 1536 {
            var shrink = (32 * 32 * 1536 / (w * h)).squareRoot()
            shrink *= min((w * shrink / 32).rounded(.down) / (w * shrink / 32), (h * shrink / 32).rounded(.down) / (h * shrink / 32))
            patches = (w * shrink / 32 - 1e-9).rounded(.up) * (h * shrink / 32 - 1e-9).rounded(.up)
        }
        return Int((patches * 1.62).rounded(.up))
    }

    /// Sends `body` for `user`; the response, and its `Tally-Charge` when it has one.
    static func ask(_ api: APIConnection, _ user: TestUser, _ body: [JSONKey: JSONValue]) async throws -> (APIResponse, AICharge?) {
        let response = try await api.send(.post, "/v1/ai/chat/completions", token: user.accessToken, raw: String(decoding: JSONValue.object(body).bytes, as: UTF8.self))
        let charge = response.headers[HTTPField.Name(AIGatewayProtocol.chargeHeader)!].flatMap {
            try? JSONDecoder.tallyAPI.decode(AICharge.self, from: Data($0.utf8))
        }
        return (response, charge)
    }

    static let sizes = [(64, 64), (512, 512), (1024, 1024), (2048, 768), (1920, 1080), (333, 777), (4096, 4096)]

    @Test("PNG, JPEG (SOF behind a 20 KB APP1), WebP and GIF from 64² to 4096², low/high/auto, tiles and patches: each held at exactly the rule, charged the upstream's usage, forwarded byte for byte", arguments: StoreKind.allCases)
    func heldByTheRule(_ kind: StoreKind) async throws {
        try await Self.with(kind) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 10_000_000)
            let textBound = Self.textBound()
            #expect(Self.tileTokens(1024, 1024, detail: "high") == 765 && Self.tileTokens(2048, 768, detail: nil) == 1445, "OpenAI's examples")
            var expectedHolds: [String] = []
            var charged: Int64 = 0
            for format in ImageHeader.Format.allCases {
                for (width, height) in Self.sizes {
                    let bytes = SyntheticImage.bytes(format, width: width, height: height, exifBytes: format == .jpeg ? 20_000 : 0)
                    let url = SyntheticImage.dataURL(bytes, format: format)
                    for model in ["vision", "patches"] {
                        for detail in ["low", "high", "auto", nil] {
                            let images = model == "vision" ? Self.tileTokens(width, height, detail: detail) : Self.patchTokens(width, height)
                            let part = Self.imagePart(url, detail: detail)
                            let usage = ChatUsage(promptTokens: images + 13, completionTokens: 4)
                            upstream.answer(usage: usage)
                            let (response, charge) = try await Self.ask(api, user, Self.question(model, [part]))
                            let what = "\(format) \(width)×\(height) \(model) \(detail ?? "-")"
                            #expect(response.status == .ok, "\(what): \(response.text)")
                            let hold = Int64(textBound + images + Self.cap)
                            #expect(charge?.held == hold, "\(what): held \(String(describing: charge?.held)), the rule says \(hold) (\(images) for the image)")
                            #expect(charge?.charged == Int64(images + 17) && charge?.promptTokens == images + 13, "\(what): the upstream's usage")
                            charged += Int64(images + 17)
                            expectedHolds.append("\(hold) prompt<=\(textBound + images) completion<=\(Self.cap) images=\(images)")
                            // The provider gets the part as sent: its data URL byte for byte, its detail, nothing added.
                            let forwarded = upstream.lastBody?["messages"]?[0]?["content"]?[1]
                            #expect(forwarded == part, "\(what): forwarded \(String(describing: forwarded).prefix(200))")
                            #expect(forwarded?["image_url"]?["url"]?.stringValue == url)
                        }
                    }
                }
            }
            // The ledger's holds say the same: each held its amount, its image tokens in its reason.
            let holds = try await api.allEntries(user).filter { $0.kind == "hold" }.map { entry in
                "\(entry.heldChange) " + (entry.reason ?? "").split(separator: " ").drop { !$0.hasPrefix("prompt<=") }.joined(separator: " ")
            }
            #expect(holds.sorted() == expectedHolds.sorted())
            let wallet = try await AIGatewayTests.settled(api, user)
            #expect(wallet.balance == 10_000_000 - charged && wallet.held == 0)
            #expect(upstream.requests == expectedHolds.count)
            try await api.expectBooksBalance(user)
        }
    }

    @Test("Real encoders' files (Pillow's JPEG with EXIF, PNG, WebP, GIF) are held by their real size and reach the upstream unchanged", arguments: StoreKind.allCases)
    func realFiles(_ kind: StoreKind) async throws {
        try await Self.with(kind) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 100_000)
            let files: [(String, ImageHeader.Format, Int, Int)] = [
                ("face-640x480-exif.jpg", .jpeg, 640, 480), ("portrait-333x777-progressive.jpg", .jpeg, 333, 777),
                ("banner-2048x768-alpha.png", .png, 2048, 768), ("huge-4096x4096.webp", .webp, 4096, 4096), ("palette-640x480.gif", .gif, 640, 480),
            ]
            for (name, format, width, height) in files {
                let url = SyntheticImage.dataURL(try Self.fixture(name), format: format)
                upstream.answer(usage: ChatUsage(promptTokens: 1, completionTokens: 1))
                let (response, charge) = try await Self.ask(api, user, Self.question("vision", [Self.imagePart(url, detail: "high")]))
                #expect(response.status == .ok, "\(name): \(response.text)")
                #expect(charge?.held == Int64(Self.textBound() + Self.tileTokens(width, height, detail: "high") + Self.cap), "\(name)")
                #expect(upstream.lastBody?["messages"]?[0]?["content"]?[1]?["image_url"]?["url"]?.stringValue == url, "\(name)")
            }
        }
    }

    static func fixture(_ name: String) throws -> [UInt8] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/images/\(name)")
        return Array(try Data(contentsOf: url))
    }

    @Test("One credit short of the hold: 402 and no upstream call; one credit to spare: 200, charged the upstream's usage", arguments: StoreKind.allCases)
    func oneCreditShort(_ kind: StoreKind) async throws {
        try await Self.with(kind) { server, upstream in
            let api = server.connection()
            let url = SyntheticImage.dataURL(SyntheticImage.bytes(.jpeg, width: 1920, height: 1080, exifBytes: 20_000), format: .jpeg)
            let body = Self.question("vision", [Self.imagePart(url, detail: "high")])
            let hold = Int64(Self.textBound() + 1105 + Self.cap)
            let user = try await api.newGuest(granted: hold - 1)
            let (short, _) = try await Self.ask(api, user, body)
            #expect(short.status == .paymentRequired && short.errorCode == "insufficient_tokens", "\(short.text)")
            #expect(upstream.requests == 0, "nothing reached the provider")
            #expect(try await api.allEntries(user).map(\.kind) == ["grant"], "nothing was held")

            try await api.grant(2, to: user)
            upstream.answer(usage: ChatUsage(promptTokens: 1_110, completionTokens: 7))
            let (answered, charge) = try await Self.ask(api, user, body)
            #expect(answered.status == .ok, "\(answered.text)")
            #expect(charge?.held == hold && charge?.charged == 1_117)
            let wallet = try await AIGatewayTests.settled(api, user)
            #expect(wallet.balance == hold + 1 - 1_117 && wallet.held == 0)
            #expect(upstream.requests == 1)
            try await api.expectBooksBalance(user)
        }
    }

    @Test("Every refusal of an image question is a named 400 with no upstream call, nothing held or charged", arguments: StoreKind.allCases)
    func refusals(_ kind: StoreKind) async throws {
        try await Self.with(kind) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 100_000)
            let png = SyntheticImage.bytes(.png, width: 640, height: 480)
            let pngURL = SyntheticImage.dataURL(png, format: .png)
            let part = { (url: String) in Self.imagePart(url) }
            let audio: JSONValue = .object(["type": .string("input_audio"), "input_audio": .object(["data": .string("AAAA"), "format": .string("wav")])])
            let cases: [(String, [JSONKey: JSONValue], String)] = [
                ("an image to a model without images", Self.question("text", [part(pngURL)]), "images_not_supported"),
                ("nine images where eight are taken", Self.question("vision", Array(repeating: part(pngURL), count: 9)), "too_many_images"),
                ("an image over maxBytes", Self.question("vision", [part(SyntheticImage.dataURL(png + [UInt8](repeating: 0, count: 1 << 20), format: .png))]), "image_too_large"),
                ("bytes that are no image", Self.question("vision", [part("data:image/png;base64,AAAAAAAAAAAAAAAA")]), "invalid_image"),
                ("a truncated header", Self.question("vision", [part(SyntheticImage.dataURL(Array(png.prefix(20)), format: .png))]), "invalid_image"),
                ("a PNG declared as a JPEG", Self.question("vision", [part("data:image/jpeg;base64," + Data(png).base64EncodedString())]), "invalid_image"),
                ("a BMP", Self.question("vision", [part("data:image/bmp;base64,Qk0AAAAA")]), "invalid_image"),
                ("malformed base64", Self.question("vision", [part("data:image/png;base64,@@@@")]), "invalid_image"),
                ("a data URL without base64", Self.question("vision", [part("data:image/png,abc")]), "invalid_image"),
                ("an unknown detail", Self.question("vision", [Self.imagePart(pngURL, detail: "ultra")]), "invalid_field"),
                ("a key beyond url and detail", Self.question("vision", [.object(["type": .string("image_url"), "image_url": .object(["url": .string(pngURL), "name": .string("x")])])]), "invalid_field"),
                ("an unknown part type", Self.question("vision", [.object(["type": .string("file"), "file": .object([:])])]), "invalid_field"),
                ("an http URL", Self.question("patches", [part("http://images.example.com/a.png")]), "image_url_not_allowed"),
                ("an https URL on a model that takes data: URLs only", Self.question("vision", [part("https://images.example.com/a.png")]), "image_url_not_allowed"),
                ("an https URL off the allowed hosts", Self.question("patches", [part("https://evil.example.com/a.png")]), "image_url_not_allowed"),
                ("an allowed host behind userinfo", Self.question("patches", [part("https://images.example.com@evil.example.com/a.png")]), "image_url_not_allowed"),
                ("another scheme", Self.question("patches", [part("ftp://images.example.com/a.png")]), "image_url_not_allowed"),
                ("an audio part", Self.question("vision", [audio]), "audio_not_supported"),
                ("a message's audio", ["model": .string("vision"), "messages": .array([.object(["role": .string("assistant"), "content": .null, "audio": .object(["id": .string("a1")])])])], "audio_not_supported"),
            ]
            for (what, body, code) in cases {
                let (response, _) = try await Self.ask(api, user, body)
                #expect(response.status == .badRequest && response.errorCode == code, "\(what): \(response.status) \(response.text)")
            }
            #expect(upstream.requests == 0, "no refusal reached the provider")
            #expect(try await api.allEntries(user).map(\.kind) == ["grant"], "nothing was held or charged")
            let wallet = try await api.wallet(user)
            #expect(wallet.balance == 100_000 && wallet.held == 0)
        }
    }

    @Test("An https image on an allowed host is held at the model's costliest image and forwarded as sent", arguments: StoreKind.allCases)
    func urlHeldAtTheCostliest(_ kind: StoreKind) async throws {
        try await Self.with(kind) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 100_000)
            let part = Self.imagePart("https://Images.Example.com/cat.png?size=large", detail: "low")
            upstream.answer(usage: ChatUsage(promptTokens: 900, completionTokens: 3))
            let (response, charge) = try await Self.ask(api, user, Self.question("patches", [part]))
            #expect(response.status == .ok, "\(response.text)")
            // 1,536 patches × 1.62, rounded up; the patch model has no price of its own for low.
            #expect(charge?.held == Int64(Self.textBound() + 2_489 + Self.cap) && charge?.charged == 903)
            #expect(upstream.lastBody?["messages"]?[0]?["content"]?[1] == part)
        }
    }

    @Test("A stream cancelled mid-answer is charged its images' tokens exactly and its text as estimated, never above the hold", arguments: StoreKind.allCases)
    func cancelledStream(_ kind: StoreKind) async throws {
        try await Self.with(kind) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 1_000_000)
            let url = SyntheticImage.dataURL(SyntheticImage.bytes(.webp, width: 4032, height: 3024), format: .webp)
            let images = Self.tileTokens(4032, 3024, detail: "high")
            #expect(images == 765)
            let text = String(repeating: "Describe this photograph in detail, please. ", count: 20)
            let textBound = Self.textBound(text)
            let body = Self.question("vision", [Self.imagePart(url, detail: "high")], stream: true, text: text)
            let hold = Int64(textBound + images + Self.cap)

            /// Streams `body`, leaves after the first generated chunk; the prompt tokens the capture's reason names.
            @Sendable func cancel() async throws -> (prompt: Int, charged: Int64) {
                let before = try await api.wallet(user).balance
                upstream.answer(usage: ChatUsage(promptTokens: 1, completionTokens: 1), pauseStreams: true)
                let (stream, head) = try await EventStreamClient.open(
                    port: server.port, token: user.accessToken, path: "/v1/ai/chat/completions", json: JSONValue.object(body).bytes)
                #expect(head.status == 200)
                while true {
                    guard case .event(_, _, let data) = try await stream.nextEvent() else { continue }
                    if data.contains("\"content\":\"A\"") { break }
                }
                #expect(try await api.wallet(user).held == hold, "held while the stream runs")
                await stream.close()
                upstream.releasePaused()
                let wallet = try await AIGatewayTests.settled(api, user)
                let capture = try #require(try await api.allEntries(user).first { $0.kind == "capture" })
                let reason = try #require(capture.reason)
                #expect(reason.hasSuffix("(estimated)"), "\(reason)")
                let prompt = try #require(reason.split(separator: " ").first { $0.hasPrefix("prompt=") }.flatMap { Int($0.dropFirst(7)) })
                return (prompt, before - wallet.balance)
            }

            // Before the model has 20 completed calls, the whole text bound is charged, and the images' tokens.
            let first = try await cancel()
            #expect(first.prompt == textBound + images, "prompt \(first.prompt)")
            #expect(first.charged >= Int64(images + 1) && first.charged <= hold, "charged \(first.charged) of \(hold)")

            // After 20 calls whose usage counted the text at 200 tokens: the text is estimated, the images counted exactly.
            for _ in 0..<20 {
                upstream.answer(usage: ChatUsage(promptTokens: images + 200, completionTokens: 2))
                var plain = body
                plain["stream"] = nil
                let (response, _) = try await Self.ask(api, user, plain)
                #expect(response.status == .ok)
            }
            let second = try await cancel()
            let estimatedText = second.prompt - images
            #expect(estimatedText >= PromptEstimator.floor(bound: textBound) && estimatedText < textBound, "text estimated at \(estimatedText) of \(textBound)")
            #expect(estimatedText >= 200 && estimatedText <= 220, "the text as the completed calls counted it (200): \(estimatedText)")
            #expect(second.charged >= Int64(images + 1) && second.charged <= hold, "charged \(second.charged) of \(hold)")
            try await api.expectBooksBalance(user)
        }
    }
}

/// An OpenAI-compatible upstream for the image tests, on loopback: it keeps every body it is sent, answers with the
/// usage the test chose (not streamed: one completion; streamed: a role chunk, content chunks, the usage, `[DONE]`),
/// and, when asked, pauses a stream after its first content chunk until ``releasePaused()``, then generates a chunk
/// every 10 ms until the gateway hangs up (a provider still generating when its client left).
final class ImageUpstream: Sendable {
    private struct State {
        var bodies: [[UInt8]] = []
        var usage = ChatUsage(promptTokens: 1, completionTokens: 1)
        var pauseStreams = false
        var paused: [CheckedContinuation<Void, Never>] = []
        /// Releases asked for while no stream was paused yet: the next pauses return at once.
        var early = 0
        var stopped = false
    }

    private let state = Mutex(State())

    /// Requests received.
    var requests: Int { state.withLock { $0.bodies.count } }
    /// The last body received, parsed.
    var lastBody: JSONValue? { state.withLock { $0.bodies.last }.flatMap { try? JSONValue.parse($0) } }

    /// The usage the next answers report; whether their streams pause after the first content chunk.
    func answer(usage: ChatUsage, pauseStreams: Bool = false) {
        state.withLock { ($0.usage, $0.pauseStreams) = (usage, pauseStreams) }
    }

    /// Lets the paused streams go on (or, when none is paused yet, the next one not pause).
    func releasePaused() {
        let waiters = state.withLock { state in
            defer { state.paused = [] }
            if state.paused.isEmpty { state.early += 1 }
            return state.paused
        }
        for waiter in waiters { waiter.resume() }
    }

    private func pause() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                if state.stopped { return true }
                if state.early > 0 {
                    state.early -= 1
                    return true
                }
                state.paused.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func stop() {
        let waiters = state.withLock { state in
            defer { (state.paused, state.stopped) = ([], true) }
            return state.paused
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Runs `body` with an upstream on a free loopback port, then shuts it down.
    static func with<T: Sendable>(_ body: @Sendable (ImageUpstream, Int) async throws -> T) async throws -> T {
        let upstream = ImageUpstream()
        let router = Router()
        router.post("v1/chat/completions") { request, _ -> Response in try await upstream.respond(request) }
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) }, logger: Logger(label: "image-upstream"))
        return try await withThrowingTaskGroup(of: Void.self) { group in
            let services = ServiceGroup(configuration: .init(services: [app], logger: Logger(label: "image-upstream")))
            group.addTask { try await services.run() }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CancellationError() }
            defer {
                upstream.stop()
                Task { await services.triggerGracefulShutdown() }
            }
            return try await body(upstream, port)
        }
    }

    private func respond(_ request: Request) async throws -> Response {
        let bytes = Array(try await request.body.collect(upTo: 64 << 20).readableBytesView)
        let (usage, pauses) = state.withLock { state in
            state.bodies.append(bytes)
            return (state.usage, state.pauseStreams)
        }
        let usageJSON = #"{"prompt_tokens":\#(usage.promptTokens),"completion_tokens":\#(usage.completionTokens)}"#
        guard (try? JSONValue.parse(bytes))?["stream"] == .bool(true) else {
            let answer = #"{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"A picture."},"finish_reason":"stop"}],"usage":\#(usageJSON)}"#
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: answer)))
        }
        @Sendable func chunk(_ delta: String) -> ByteBuffer {
            ByteBuffer(string: #"data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":\#(delta)}]}"# + "\n\n")
        }
        return Response(status: .ok, headers: [.contentType: "text/event-stream"], body: ResponseBody { writer in
            try await writer.write(chunk(#"{"role":"assistant","content":""}"#))
            try await writer.write(chunk(#"{"content":"A"}"#))
            if pauses {
                await self.pause()
                // Still generating when the gateway's client left: each write until the gateway hangs up.
                for _ in 0..<3_000 {
                    try await writer.write(chunk(#"{"content":" b"}"#))
                    try await Task.sleep(for: .milliseconds(10))
                }
            }
            try await writer.write(ByteBuffer(string: #"data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":\#(usageJSON)}"# + "\n\ndata: [DONE]\n\n"))
            try await writer.finish(nil)
        })
    }
}

extension JSONValue {
    /// The `index`th element of an array.
    fileprivate subscript(index: Int) -> JSONValue? {
        guard case .array(let elements) = self, elements.indices.contains(index) else { return nil }
        return elements[index]
    }
}
