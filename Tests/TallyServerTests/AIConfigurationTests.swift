import Foundation
import NIOCore
import TallyAPI
@testable import TallyServer
import TallyStore
import Testing

/// The `ai:` section of `TALLY_CONFIG`, and the pure rules that turn a client's request into what is held and sent.
@Suite("AI configuration and request rules", .timeLimit(.minutes(2)))
struct AIConfigurationTests {
    static let catalog = try! Catalog(
        signupGrant: 0, quotas: [QuotaSpec(name: "readings", daily: 3)],
        actions: [ActionSpec(name: "ai.daily", quota: "readings", tokens: 5)])
    static let yaml = """
        ai:
          upstream: {baseURL: "https://api.example.com/v1/", apiKeyEnv: PROVIDER_KEY, capField: max_tokens}
          models:
            - {name: chat, upstreamModel: gpt-x, promptTokensPerCredit: 1000, completionTokensPerCredit: 250, maxCompletionTokens: 512}
          maxConcurrentPerUser: 2
          dailyGenerations:
            - {name: todays_prediction, model: chat, prompt: "For {{sign}} on {{date}} in {{language}}: {{profile.name}}", params: [sign], action: ai.daily, profileDocument: profile/me}
            - {name: quote, model: chat, prompt: "A quote for {{timezone}}", quota: readings}
        """

    @Test("A full ai: section parses; the key comes from the environment and never shows in the description")
    func parses() throws {
        let ai = try #require(try TallyConfiguration(file: Self.yaml, catalog: Self.catalog, environment: ["PROVIDER_KEY": "sk-secret-1"]).ai)
        #expect(ai.upstream.baseURL == "https://api.example.com/v1" && ai.upstream.apiKey == "sk-secret-1")
        #expect(ai.upstream.capField == .maxTokens && !ai.upstream.description.contains("sk-secret-1"))
        #expect(ai.models.map(\.upstreamModel) == ["gpt-x"] && ai.maxConcurrentPerUser == 2)
        let daily = ai.dailyGenerations
        #expect(daily.map(\.name) == ["todays_prediction", "quote"])
        #expect(daily[0].action.tokens == 5 && daily[0].quotaLimit == 3 && daily[0].profileDocument?.collection == "profile")
        #expect(daily[1].action.quota == "readings" && daily[1].action.tokens == nil && daily[1].quotaLimit == 3)
        let user = UserRecord(id: "u", email: nil, timezone: "Asia/Tokyo", language: "ja", premiumUntil: nil, createdAt: Date())
        #expect(daily[0].prompt.render(day: "2026-11-24", user: user, parameters: ["sign": "leo"], profile: .object(["name": .string("Aki")]))
            == "For leo on 2026-11-24 in ja: Aki")
        #expect(daily[1].prompt.render(day: "d", user: user, parameters: [:], profile: nil) == "A quote for Asia/Tokyo")
        #expect(try TallyConfiguration(file: "signupGrant: 0", catalog: Self.catalog).ai == nil)
    }

    @Test("Mistakes are refused with a message naming them", arguments: [
        ("apiKeyEnv names PROVIDER_KEY", Self.yaml, [String: String]()),
        (#"unknown key "price" in ai.models[0]; known keys: name, upstreamModel, promptTokensPerCredit, completionTokensPerCredit, maxCompletionTokens, images, premium"#, "ai: {upstream: {baseURL: 'http://x/v1'}, models: [{name: a, price: 1, promptTokensPerCredit: 1, completionTokensPerCredit: 1, maxCompletionTokens: 1}]}", [:]),
        ("baseURL must be an http(s) URL", "ai: {upstream: {baseURL: 'ftp://x'}, models: [{name: a, promptTokensPerCredit: 1, completionTokensPerCredit: 1, maxCompletionTokens: 1}]}", [:]),
        ("declare at least one model", "ai: {upstream: {baseURL: 'http://x/v1'}, models: []}", [:]),
        ("unknown placeholder {{nope}}", "ai: {upstream: {baseURL: 'http://x/v1'}, models: [{name: a, promptTokensPerCredit: 1, completionTokensPerCredit: 1, maxCompletionTokens: 1}], dailyGenerations: [{name: d, model: a, prompt: '{{nope}}', quota: readings}]}", [:]),
        ("not both", "ai: {upstream: {baseURL: 'http://x/v1'}, models: [{name: a, promptTokensPerCredit: 1, completionTokensPerCredit: 1, maxCompletionTokens: 1}], dailyGenerations: [{name: d, model: a, prompt: x, action: ai.daily, quota: readings}]}", [:]),
        ("give an action or a quota", "ai: {upstream: {baseURL: 'http://x/v1'}, models: [{name: a, promptTokensPerCredit: 1, completionTokensPerCredit: 1, maxCompletionTokens: 1}], dailyGenerations: [{name: d, model: a, prompt: x}]}", [:]),
        ("no model named 'b'", "ai: {upstream: {baseURL: 'http://x/v1'}, models: [{name: a, promptTokensPerCredit: 1, completionTokensPerCredit: 1, maxCompletionTokens: 1}], dailyGenerations: [{name: d, model: b, prompt: x, quota: readings}]}", [:]),
        ("capField must be", "ai: {upstream: {baseURL: 'http://x/v1', capField: max}, models: [{name: a, promptTokensPerCredit: 1, completionTokensPerCredit: 1, maxCompletionTokens: 1}]}", [:]),
    ])
    func refused(_ expected: String, _ yaml: String, _ environment: [String: String]) {
        #expect {
            _ = try TallyConfiguration(file: yaml, catalog: Self.catalog, environment: environment)
        } throws: { error in
            "\(error)".contains(expected)
        }
    }

    static let gateway = AIConfiguration(
        upstream: AIUpstream(baseURL: "http://x/v1", apiKey: nil),
        models: [AIModelSpec(name: "chat", upstreamModel: "gpt-x", promptTokensPerCredit: 100, completionTokensPerCredit: 10, maxCompletionTokens: 300)])

    static func parse(_ json: String) throws -> ChatRequest {
        try ChatRequest.parse(ByteBuffer(string: json), user: "user-1", configuration: gateway)
    }

    @Test("The upstream body names the upstream model, caps the completion in the configured field, always asks a stream for usage, and keeps the rest")
    func rewrite() throws {
        let request = try Self.parse(#"{"model":"chat","stream":true,"max_tokens":50,"max_completion_tokens":80,"temperature":0.2,"messages":[{"role":"user","content":"hi"}]}"#)
        let sent = try JSONValue.parse(request.upstreamBody.joined.readableBytesView)
        #expect(sent["model"] == .string("gpt-x") && sent["max_completion_tokens"] == .int(50) && sent["max_tokens"] == nil)
        #expect(sent["stream_options"]?["include_usage"] == .bool(true) && sent["temperature"] == .number("0.2"))
        #expect(request.completionLimit == 50 && request.stream && !request.clientWantsUsage)
        let uncapped = try Self.parse(#"{"model":"chat","messages":[{"role":"user","content":"hi"}]}"#)
        let uncappedBody = try JSONValue.parse(uncapped.upstreamBody.joined.readableBytesView)
        #expect(uncapped.completionLimit == 300 && uncappedBody["stream_options"] == nil)
        #expect(try Self.parse(#"{"model":"chat","max_tokens":100000,"messages":[{"role":"user","content":"hi"}]}"#).completionLimit == 300)
    }

    @Test("An app computes exactly what the gateway holds, from the listed model and its own request")
    func appComputesTheHold() throws {
        var generator = SplitMix64(seed: 21)
        let texts = ["hello", "こんにちは世界", "Ünïcödé ✓ \u{1F600}", "a \"quoted\" line\nand a tab\t", String(repeating: "long ", count: 300)]
        let model = try JSONDecoder().decode(AIModelList.self, from: try JSONEncoder().encode(AIModelList(items: Self.gateway.models))).items[0]
        #expect(model.upstreamModel == "chat", "the upstream's name is not listed")
        for _ in 0..<200 {
            let messages = (0..<Int(generator.next() % 4 + 1)).map { index in
                ChatMessage(role: index % 2 == 0 ? "user" : "assistant", content: texts[Int(generator.next() % UInt64(texts.count))])
            }
            let cap = generator.next() % 3 == 0 ? nil : Int(generator.next() % 500 + 1)
            let request = ChatCompletionRequest(model: "chat", messages: messages, maxTokens: cap)
            let held = try ChatRequest.parse(ByteBuffer(bytes: try JSONEncoder().encode(request)), user: "user-1", configuration: Self.gateway).maxCost
            #expect(try model.hold(for: request) == held, "\(request)")
        }
    }

    @Test("The hold bounds the prompt by its bytes (tools included) whatever the script, and prices the whole cap")
    func bound() throws {
        let english = try Self.parse(#"{"model":"chat","messages":[{"role":"user","content":"hello"}]}"#)
        let japanese = try Self.parse(#"{"model":"chat","messages":[{"role":"user","content":"こんにちは"}]}"#)
        let tools = try Self.parse(#"{"model":"chat","tools":[{"type":"function","function":{"name":"lookup","parameters":{}}}],"messages":[{"role":"user","content":"hello"}]}"#)
        #expect(japanese.promptBound >= english.promptBound + 10, "15 UTF-8 bytes against 5")
        #expect(tools.promptBound > english.promptBound + 40)
        #expect(english.maxCost == AIModelSpec(name: "chat", promptTokensPerCredit: 100, completionTokensPerCredit: 10, maxCompletionTokens: 300)
            .cost(promptTokens: english.promptBound, completionTokens: 300))
        // A missing usage is never zero: the bound and the chunks counted, and never above the hold.
        let counted = ChatCharge.of(english, usage: nil, chunks: 7)
        #expect(counted.promptTokens == english.promptBound && counted.completionTokens == 7 && counted.amount > 0 && !counted.fromUsage)
        #expect(ChatCharge.of(english, usage: ChatUsage(promptTokens: 1_000_000, completionTokens: 1_000_000), chunks: 0).amount == english.maxCost)
    }

    @Test("The relay's scan finds generated text (content, tool calls, reasoning), usage and errors as a parse would, usage:null and quoted words included")
    func chunkScan() {
        let cases: [(String, content: Bool, parse: Bool)] = [
            (#"{"choices":[{"delta":{"content":"Light"},"index":0}],"usage":null}"#, true, false),
            (#"{"choices":[{"delta":{"content":""},"index":0}]}"#, false, false),
            (#"{"choices":[{"delta":{"role":"assistant","content": "a"}}]}"#, true, false),
            (#"{"choices":[{"delta":{"content":"the \"error\" and \"usage\": {x}"}}]}"#, true, false),
            (#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#, false, true),
            (#"{"choices":[], "usage": {"prompt_tokens":3}}"#, false, true),
            (#"{"error":{"message":"boom"}}"#, false, true),
            (#"{"choices":[{"delta":{},"finish_reason":"stop"}],"usage":null}"#, false, false),
            // Tool calls, refusals and streamed reasoning are generated tokens too (counted when no usage comes).
            (#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"lookup","arguments":""}}]}}]}"#, true, false),
            (#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}"#, true, false),
            (#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":""}}]}}]}"#, false, false),
            (#"{"choices":[{"delta":{"content":null,"reasoning_content":"Let me think"}}]}"#, true, false),
            (#"{"choices":[{"delta":{"reasoning":"so"}}]}"#, true, false),
            (#"{"choices":[{"delta":{"refusal":"I can't"}}]}"#, true, false),
        ]
        for (chunk, content, parse) in cases {
            let bytes = Array(chunk.utf8)
            #expect(ChunkScan.mayCarryUsageOrError(bytes) == parse, "\(chunk)")
            if !parse { #expect(ChunkScan.carriesGeneratedText(bytes) == content, "\(chunk)") }
        }
    }
}

/// A model's `images:` and `premium:`, and the chat route's body limits, in the `ai:` section.
extension AIConfigurationTests {
    static func section(_ model: String, _ extra: String = "") -> String {
        """
        ai:
          upstream: {baseURL: "http://x/v1"}
          models:
            - {name: vision, promptTokensPerCredit: 1000, completionTokensPerCredit: 250, maxCompletionTokens: 512\(model)}
        \(extra)
        """
    }

    @Test("images: takes the tile rule's keys or the patch rule's, defaults from AIImageRule; premium: tokens, free or a catalog quota; the body limits default to 24 MiB and 256 MiB")
    func imagesAndPremiumParse() throws {
        let tiles = try #require(try TallyConfiguration(
            file: Self.section(", images: {tileTokens: 129, maxPerRequest: 4, allowedURLHosts: [Images.Example.com]}, premium: free"),
            catalog: Self.catalog).ai)
        let rule = try #require(tiles.models[0].images)
        #expect(rule.sizing == .tiles(baseTokens: 85, tileTokens: 129, tileSize: 512, fitWithin: 2048, shortestSide: 768))
        #expect(rule.lowDetailTokens == 85 && rule.maxPerRequest == 4 && rule.maxBytes == 10 << 20)
        #expect(rule.allowedURLHosts == ["images.example.com"], "hosts compare lower-cased")
        #expect(tiles.models[0].premium == .free && tiles.maxRequestBytes == 25_165_824 && tiles.requestBytesInFlight == 268_435_456)

        let patches = try #require(try TallyConfiguration(
            file: Self.section(
                ", images: {patchSize: 32, maxPatches: 1536, patchMultiplier: 1.62, maxBytes: 2000000}, premium: {quota: readings}",
                "  maxRequestBytes: 4194304\n  requestBytesInFlight: 8388608"),
            catalog: Self.catalog).ai)
        #expect(patches.models[0].images?.sizing == .patches(patchSize: 32, maxPatches: 1536, multiplier: 1.62))
        #expect(patches.models[0].images?.lowDetailTokens == nil, "a patch-priced model prices low like high unless told")
        #expect(patches.models[0].premium == .quota("readings"))
        #expect(patches.maxRequestBytes == 4 << 20 && patches.requestBytesInFlight == 8 << 20)

        let plain = try #require(try TallyConfiguration(file: Self.section(""), catalog: Self.catalog).ai)
        #expect(plain.models[0].images == nil && plain.models[0].premium == .tokens)
        // A budget left out is never below the body limit set.
        let big = try #require(try TallyConfiguration(file: Self.section("", "  maxRequestBytes: 536870912"), catalog: Self.catalog).ai)
        #expect(big.requestBytesInFlight == 536_870_912)
    }

    @Test("Each images:/premium:/body limit mistake is refused with a message naming it", arguments: [
        (", images: {tileSize: 0}", "", "images: tileSize must be between 1 and 65536"),
        (", images: {baseTokens: -1}", "", "baseTokens must be between 1 and 1000000"),
        (", images: {lowDetailTokens: 0}", "", "lowDetailTokens must be between 1"),
        (", images: {tileSize: 4096}", "", "tileSize (4096) and shortestSide (768) must be at most fitWithin (2048)"),
        (", images: {shortestSide: 3000}", "", "must be at most fitWithin"),
        (", images: {maxPerRequest: 0}", "", "maxPerRequest must be between 1 and 64"),
        (", images: {maxPerRequest: 65}", "", "maxPerRequest must be between 1 and 64"),
        (", images: {maxBytes: 0}", "", "maxBytes must be between 1 and ai.maxRequestBytes (25165824)"),
        (", images: {maxBytes: 2000000}", "  maxRequestBytes: 1048576", "maxBytes must be between 1 and ai.maxRequestBytes (1048576)"),
        (", images: {patchSize: 32, maxPatches: 1536, patchMultiplier: 0}", "", "patchMultiplier must be a number above 0"),
        (", images: {patchSize: 32, maxPatches: 1536, patchMultiplier: .nan}", "", "patchMultiplier must be a number above 0"),
        (", images: {patchSize: 32, maxPatches: 1536}", "", "needs patchMultiplier too"),
        (", images: {patchSize: 32, maxPatches: 1536, patchMultiplier: 1.62, tileSize: 512}", "", "tiles or patches, not both"),
        (", images: {maxPatches: 1536}", "", "maxPatches needs patchSize"),
        (", images: {allowedURLHosts: ['https://images.example.com']}", "", "'https://images.example.com' is not a plain hostname"),
        (", images: {allowedURLHosts: ['images.example.com:443']}", "", "is not a plain hostname"),
        (", images: {allowedURLHosts: ['*.example.com']}", "", "is not a plain hostname"),
        (", images: {allowedURLHosts: ['10.0.0.1']}", "", "is not a plain hostname"),
        (", images: {tileSize: 512, colour: true}", "", #"unknown key "colour" in ai.models[0].images"#),
        (", premium: always", "", "premium: 'always' is not tokens, free or {quota: name}"),
        (", premium: {quota: readings, also: 1}", "", "with no other key"),
        (", premium: {quota: nope}", "", "premium: no quota named 'nope' (quotas: readings)"),
        ("", "  maxRequestBytes: 1000", "ai.maxRequestBytes must be between 1048576 (1 MiB) and 1073741824 (1 GiB)"),
        ("", "  maxRequestBytes: 2097152\n  requestBytesInFlight: 1048576", "ai.requestBytesInFlight (1048576) must be at least ai.maxRequestBytes (2097152)"),
    ])
    func imagesAndPremiumRefused(_ model: String, _ extra: String, _ expected: String) {
        #expect {
            _ = try TallyConfiguration(file: Self.section(model, extra), catalog: Self.catalog)
        } throws: { error in
            "\(error)".contains(expected)
        }
    }

    @Test("images:, premium: and the body limits round-trip through the effective configuration, as every key does")
    func imagesAndPremiumRoundTrip() throws {
        let text = Self.section(
            ", images: {patchSize: 16, maxPatches: 900, patchMultiplier: 2.5, lowDetailTokens: 70, maxBytes: 2000000, allowedURLHosts: [cdn.example.org]}, premium: {quota: readings}",
            "  maxRequestBytes: 3145728\n  requestBytesInFlight: 9437184")
        let configuration = try TallyConfiguration(file: text, catalog: Self.catalog)
        let written = configuration.effectiveFile
        for line in ["patchMultiplier: 2.5", "quota: readings", "maxRequestBytes: 3145728", "requestBytesInFlight: 9437184", "- cdn.example.org"] {
            #expect(written.contains(line), "\(line) in\n\(written)")
        }
        let reread = try TallyConfiguration(file: written, catalog: Self.catalog)
        #expect(reread.ai?.models == configuration.ai?.models)
        #expect(ConfigurationFile(effective: reread) == ConfigurationFile(effective: configuration))
        let tiles = try TallyConfiguration(file: Self.section(", images: {}, premium: free"), catalog: Self.catalog)
        #expect(try TallyConfiguration(file: tiles.effectiveFile, catalog: Self.catalog).ai?.models == tiles.ai?.models)
        #expect(tiles.effectiveFile.contains("premium: free") && tiles.effectiveFile.contains("shortestSide: 768"))
    }
}
