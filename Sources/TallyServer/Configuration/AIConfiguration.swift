import Foundation
import TallyAPI
import TallyStore

/// The AI gateway: the `ai:` key of the configuration file (`TALLY_CONFIG`). Absent: no `/v1/ai` routes.
///
/// ```yaml
/// ai:
///   upstream: {baseURL: "https://api.openai.com/v1", apiKeyEnv: OPENAI_API_KEY}
///   models:
///     - {name: chat, upstreamModel: gpt-4o-mini, promptTokensPerCredit: 1000, completionTokensPerCredit: 250, maxCompletionTokens: 1024,
///        images: {maxPerRequest: 8}, premium: tokens}
///   maxConcurrentPerUser: 4
///   maxRequestBytes: 25165824          # the chat route's body limit (other routes keep theirs)
///   requestBytesInFlight: 268435456    # chat bodies held at once per process; beyond, 503 busy before reading
///   dailyGenerations:
///     - {name: todays_prediction, model: chat, prompt: "A one-line horoscope for {{sign}} on {{date}}, in {{language}}.", params: [sign], action: ai.daily}
/// ```
public struct AIConfiguration: Sendable {
    /// Where completions are sent, and with which key.
    public var upstream: AIUpstream
    /// The models offered, by the name clients ask for.
    public var models: [AIModelSpec]
    /// Calls one user may have in flight; one more is refused with 429.
    public var maxConcurrentPerUser = 4
    /// The generations computed once per user and local day.
    public var dailyGenerations: [DailyGenerationSpec] = []
    /// The largest body `POST /v1/ai/chat/completions` reads (24 MiB by default: a few photos in base64); beyond it,
    /// 413 `body_too_large`. Every other route keeps its own limit.
    public var maxRequestBytes = 25_165_824
    /// The bytes of chat bodies one process holds at once (256 MiB by default): a request reserves its length before
    /// its body is read and keeps it until its call ends; one the budget cannot take is answered 503 `busy` with
    /// `Retry-After`, its body unread. At least ``maxRequestBytes``.
    public var requestBytesInFlight = 268_435_456

    /// A gateway to `upstream` offering `models`.
    public init(
        upstream: AIUpstream, models: [AIModelSpec], maxConcurrentPerUser: Int = 4, dailyGenerations: [DailyGenerationSpec] = [],
        maxRequestBytes: Int = 25_165_824, requestBytesInFlight: Int = 268_435_456
    ) {
        self.upstream = upstream
        self.models = models
        self.maxConcurrentPerUser = maxConcurrentPerUser
        self.dailyGenerations = dailyGenerations
        self.maxRequestBytes = maxRequestBytes
        self.requestBytesInFlight = requestBytesInFlight
    }

    /// The bounds of ``maxRequestBytes``: at least the 1 MiB every route takes, at most 1 GiB.
    static let maxRequestBytesRange = (1 << 20)...(1 << 30)

    /// The model clients call `name`.
    func model(named name: String) -> AIModelSpec? { models.first { $0.name == name } }

    /// The `ai:` section as written. The upstream's key is read from the environment variable `apiKeyEnv`
    /// names; a daily generation's `action` must be one of the catalog's and its `quota` one of its quotas.
    struct File: Codable, Equatable {
        var upstream: UpstreamEntry
        var models: [ModelEntry]
        var maxConcurrentPerUser: Int?
        var maxRequestBytes: Int?
        var requestBytesInFlight: Int?
        var dailyGenerations: [DailyGenerationSpec.Entry]?

        /// The section that gives exactly `configuration` (whose daily generations draw on `catalog`).
        init(effective configuration: AIConfiguration, catalog: Catalog) {
            upstream = UpstreamEntry(effective: configuration.upstream)
            models = configuration.models.map(ModelEntry.init(effective:))
            maxConcurrentPerUser = configuration.maxConcurrentPerUser
            maxRequestBytes = configuration.maxRequestBytes
            requestBytesInFlight = configuration.requestBytesInFlight
            dailyGenerations = configuration.dailyGenerations.map { DailyGenerationSpec.Entry(effective: $0, catalog: catalog) }
        }

        func configuration(catalog: Catalog, environment: [String: String]) throws -> AIConfiguration {
            guard !models.isEmpty else { throw ConfigurationError("ai.models: declare at least one model") }
            let defaults = AIConfiguration(upstream: AIUpstream(baseURL: "", apiKey: nil), models: [])
            let maxRequestBytes = self.maxRequestBytes ?? defaults.maxRequestBytes
            guard AIConfiguration.maxRequestBytesRange.contains(maxRequestBytes) else {
                throw ConfigurationError("ai.maxRequestBytes must be between 1048576 (1 MiB) and 1073741824 (1 GiB)")
            }
            let requestBytesInFlight = self.requestBytesInFlight ?? max(defaults.requestBytesInFlight, maxRequestBytes)
            guard requestBytesInFlight >= maxRequestBytes else {
                throw ConfigurationError(
                    "ai.requestBytesInFlight (\(requestBytesInFlight)) must be at least ai.maxRequestBytes (\(maxRequestBytes)): one body must fit")
            }
            var names = Set<String>()
            let specs = try models.enumerated().map { index, model in
                let spec = try model.spec(place: "ai.models[\(index)]", catalog: catalog, maxRequestBytes: maxRequestBytes)
                guard names.insert(spec.name).inserted else { throw ConfigurationError("ai.models[\(index)]: '\(spec.name)' is declared twice") }
                return spec
            }
            var configuration = AIConfiguration(
                upstream: try upstream.upstream(environment: environment), models: specs, maxRequestBytes: maxRequestBytes,
                requestBytesInFlight: requestBytesInFlight)
            configuration.maxConcurrentPerUser = maxConcurrentPerUser ?? 4
            guard configuration.maxConcurrentPerUser >= 1 else { throw ConfigurationError("ai.maxConcurrentPerUser must be at least 1") }
            var generationNames = Set<String>()
            configuration.dailyGenerations = try (dailyGenerations ?? []).enumerated().map { index, entry in
                let spec = try entry.spec(catalog: catalog, models: specs, place: "ai.dailyGenerations[\(index)] (\(entry.name))")
                guard generationNames.insert(spec.name).inserted else {
                    throw ConfigurationError("ai.dailyGenerations[\(index)]: '\(spec.name)' is declared twice")
                }
                return spec
            }
            return configuration
        }
    }

    /// `upstream: {baseURL, apiKeyEnv?, capField?, timeoutSeconds?}`.
    struct UpstreamEntry: Codable, Equatable {
        var baseURL: String
        var apiKeyEnv: String?
        var capField: String?
        var timeoutSeconds: Int?

        /// The entry that gives exactly `upstream` (its key by the variable it was read from).
        init(effective upstream: AIUpstream) {
            (baseURL, apiKeyEnv, capField) = (upstream.baseURL, upstream.apiKeyEnv, upstream.capField.rawValue)
            timeoutSeconds = Int(clamping: upstream.timeout.components.seconds)
        }

        func upstream(environment: [String: String]) throws -> AIUpstream {
            guard let url = URL(string: baseURL), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw ConfigurationError("ai.upstream.baseURL must be an http(s) URL such as https://api.openai.com/v1")
            }
            let apiKey = try apiKeyEnv.map { try ConfigurationChecks.environmentValue($0, namedBy: "ai.upstream.apiKeyEnv", in: environment) }
            let cap = AIUpstream.CapField(rawValue: capField ?? AIUpstream.CapField.maxCompletionTokens.rawValue)
            guard let cap else { throw ConfigurationError("ai.upstream.capField must be max_completion_tokens or max_tokens") }
            let timeout = timeoutSeconds ?? 300
            guard (1...3600).contains(timeout) else { throw ConfigurationError("ai.upstream.timeoutSeconds must be between 1 and 3600") }
            var upstream = AIUpstream(
                baseURL: baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL, apiKey: apiKey, capField: cap,
                timeout: .seconds(timeout))
            upstream.apiKeyEnv = apiKeyEnv
            return upstream
        }
    }

    /// One model as written.
    struct ModelEntry: Codable, Equatable {
        var name: String
        var upstreamModel: String?
        var promptTokensPerCredit: Int
        var completionTokensPerCredit: Int
        var maxCompletionTokens: Int
        var images: ImagesEntry?
        var premium: PremiumEntry?

        /// The entry that declares exactly `model`.
        init(effective model: AIModelSpec) {
            (name, upstreamModel, maxCompletionTokens) = (model.name, model.upstreamModel, model.maxCompletionTokens)
            (promptTokensPerCredit, completionTokensPerCredit) = (model.promptTokensPerCredit, model.completionTokensPerCredit)
            images = model.images.map(ImagesEntry.init(effective:))
            premium = PremiumEntry(use: model.premium)
        }

        /// The model; its premium quota must be one of `catalog`'s, its images at most `maxRequestBytes` each.
        func spec(place: String, catalog: Catalog, maxRequestBytes: Int) throws -> AIModelSpec {
            guard !name.isEmpty, name.utf8.count <= 128 else { throw ConfigurationError("\(place): a name must be 1 to 128 bytes") }
            guard (1...1_000_000).contains(promptTokensPerCredit), (1...1_000_000).contains(completionTokensPerCredit) else {
                throw ConfigurationError("\(place) (\(name)): tokens per credit must be between 1 and 1000000")
            }
            guard (1...1_000_000).contains(maxCompletionTokens) else {
                throw ConfigurationError("\(place) (\(name)): maxCompletionTokens must be between 1 and 1000000")
            }
            let premium = try premium?.use(place: "\(place) (\(name))") ?? .tokens
            if case .quota(let quota) = premium, catalog.quota(named: quota) == nil {
                throw ConfigurationError(
                    "\(place) (\(name)).premium: no quota named '\(quota)' (quotas: \(catalog.quotas.map(\.name).joined(separator: ", ")))")
            }
            return AIModelSpec(
                name: name, upstreamModel: upstreamModel, promptTokensPerCredit: promptTokensPerCredit,
                completionTokensPerCredit: completionTokensPerCredit, maxCompletionTokens: maxCompletionTokens,
                images: try images?.rule(place: "\(place) (\(name)).images", maxRequestBytes: maxRequestBytes), premium: premium)
        }
    }

    /// A model's `images:` as written: `AIImageRule`'s flat keys — the tile rule's (`lowDetailTokens`, `baseTokens`,
    /// `tileTokens`, `tileSize`, `fitWithin`, `shortestSide`) or the patch rule's (`patchSize`, `maxPatches`,
    /// `patchMultiplier`, and `lowDetailTokens` if `low` has a price of its own) — and the limits (`maxPerRequest`,
    /// `maxBytes`, `allowedURLHosts`). A key left out takes ``AIImageRule``'s default.
    struct ImagesEntry: Codable, Equatable {
        var lowDetailTokens: Int?
        var baseTokens: Int?
        var tileTokens: Int?
        var tileSize: Int?
        var fitWithin: Int?
        var shortestSide: Int?
        var patchSize: Int?
        var maxPatches: Int?
        var patchMultiplier: Double?
        var maxPerRequest: Int?
        var maxBytes: Int?
        var allowedURLHosts: [String]?

        /// The entry that gives exactly `rule` (its flat form, every key written).
        init(effective rule: AIImageRule) {
            // The two are the same keys: one encodes what the other decodes.
            self = (try? JSONDecoder().decode(Self.self, from: JSONEncoder().encode(rule))) ?? ImagesEntry()
        }

        private init() {}

        /// The rule, its defaults from ``AIImageRule``, each value checked.
        func rule(place: String, maxRequestBytes: Int) throws -> AIImageRule {
            if let multiplier = patchMultiplier, !(multiplier.isFinite && multiplier > 0 && multiplier <= 1_000) {
                throw ConfigurationError("\(place): patchMultiplier must be a number above 0 (at most 1000)")
            }
            var rule: AIImageRule
            do {
                rule = try JSONDecoder().decode(AIImageRule.self, from: JSONEncoder().encode(self))
            } catch let DecodingError.dataCorrupted(context) {
                throw ConfigurationError("\(place): \(context.debugDescription)")
            } catch let DecodingError.keyNotFound(key, _) {
                throw ConfigurationError("\(place): a patch-priced model needs \(key.stringValue) too (patchSize, maxPatches, patchMultiplier)")
            }
            let positive = { (value: Int, key: String, most: Int) throws in
                guard (1...most).contains(value) else { throw ConfigurationError("\(place): \(key) must be between 1 and \(most)") }
            }
            if let low = rule.lowDetailTokens { try positive(low, "lowDetailTokens", 1_000_000) }
            switch rule.sizing {
            case .tiles(let base, let tile, let tileSize, let fitWithin, let shortestSide):
                try positive(base, "baseTokens", 1_000_000)
                try positive(tile, "tileTokens", 1_000_000)
                try positive(tileSize, "tileSize", 65_536)
                try positive(fitWithin, "fitWithin", 65_536)
                try positive(shortestSide, "shortestSide", 65_536)
                guard tileSize <= fitWithin, shortestSide <= fitWithin else {
                    throw ConfigurationError("\(place): tileSize (\(tileSize)) and shortestSide (\(shortestSide)) must be at most fitWithin (\(fitWithin))")
                }
            case .patches(let patchSize, let maxPatches, _):
                // (patchMultiplier is checked before decoding: JSON has no NaN.)
                try positive(patchSize, "patchSize", 65_536)
                try positive(maxPatches, "maxPatches", 1_000_000)
            }
            try positive(rule.maxPerRequest, "maxPerRequest", 64)
            guard (1...maxRequestBytes).contains(rule.maxBytes) else {
                throw ConfigurationError("\(place): maxBytes must be between 1 and ai.maxRequestBytes (\(maxRequestBytes))")
            }
            rule.allowedURLHosts = try rule.allowedURLHosts.map { host in
                guard Self.isHostname(host) else {
                    throw ConfigurationError(
                        "\(place): allowedURLHosts: '\(host.prefix(80))' is not a plain hostname (such as images.example.com: no scheme, port, path or wildcard)")
                }
                return host.lowercased()
            }
            return rule
        }

        /// Whether `host` is a DNS hostname: dot-separated labels of ASCII letters, digits and inner hyphens, 1 to 63
        /// bytes each, 253 in all, not all digits (an address is not a host a rule can name).
        static func isHostname(_ host: String) -> Bool {
            let labels = host.split(separator: ".", omittingEmptySubsequences: false)
            guard !host.isEmpty, host.utf8.count <= 253, labels.count >= 1 else { return false }
            let valid = labels.allSatisfy { label in
                (1...63).contains(label.utf8.count) && label.first != "-" && label.last != "-"
                    && label.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "-") }
            }
            return valid && !host.unicodeScalars.allSatisfy { CharacterSet.decimalDigits.contains($0) || $0 == "." }
        }
    }

    /// A model's `premium:` as written: `tokens`, `free` or `{quota: <name>}` (``AIPremiumUse``). The word is checked
    /// by ``use(place:)``, not while decoding, so the file's shape is found by decoding alone
    /// (``ConfigurationShape``); a mapping with another key is refused.
    struct PremiumEntry: Codable, Equatable {
        /// `tokens` or `free`, when written as a word.
        var word: String?
        /// The quota of `{quota: name}`.
        var quota: String?

        /// The entry that gives `use`.
        init(use: AIPremiumUse) {
            switch use {
            case .tokens: word = "tokens"
            case .free: word = "free"
            case .quota(let name): quota = name
            }
        }

        init(from decoder: any Decoder) throws {
            if let word = try? decoder.singleValueContainer().decode(String.self) {
                self.word = word
                return
            }
            let container = try decoder.container(keyedBy: ConfigurationKey.self)
            guard container.allKeys.map(\.stringValue) == ["quota"] else {
                throw DecodingError.dataCorrupted(
                    .init(codingPath: decoder.codingPath, debugDescription: "premium is tokens, free or {quota: name}, with no other key"))
            }
            quota = try container.decode(String.self, forKey: ConfigurationKey(stringValue: "quota"))
        }

        func encode(to encoder: any Encoder) throws {
            if let quota {
                var container = encoder.container(keyedBy: ConfigurationKey.self)
                try container.encode(quota, forKey: ConfigurationKey(stringValue: "quota"))
            } else {
                var container = encoder.singleValueContainer()
                try container.encode(word ?? "tokens")
            }
        }

        /// What premium users' calls cost; a word other than `tokens` or `free` is refused.
        func use(place: String) throws -> AIPremiumUse {
            if let quota { return .quota(quota) }
            switch word {
            case "tokens"?, nil: return .tokens
            case "free"?: return .free
            case let word?: throw ConfigurationError("\(place).premium: '\(word.prefix(64))' is not tokens, free or {quota: name}")
            }
        }
    }
}

/// The OpenAI-compatible server completions go to (OpenAI, a vLLM or Ollama server, a company gateway).
public struct AIUpstream: Sendable, CustomStringConvertible {
    /// Which request field caps a completion's tokens: OpenAI's reasoning models take only
    /// `max_completion_tokens` (which counts the reasoning they bill but never stream); older servers only `max_tokens`.
    public enum CapField: String, Sendable {
        /// OpenAI's current field (default).
        case maxCompletionTokens = "max_completion_tokens"
        /// The older field, for servers that ignore the newer one.
        case maxTokens = "max_tokens"
    }

    /// The base URL, such as `https://api.openai.com/v1`; completions go to `<baseURL>/chat/completions`.
    public var baseURL: String
    /// The key sent as `Authorization: Bearer`, never logged nor returned.
    public var apiKey: String?
    /// The environment variable the key was read from (`ai.upstream.apiKeyEnv`), if it was read from one.
    public var apiKeyEnv: String?
    /// The field the completion cap is sent in.
    public var capField: CapField
    /// The most one upstream call may last, streaming included.
    public var timeout: Duration

    /// An upstream.
    public init(baseURL: String, apiKey: String?, capField: CapField = .maxCompletionTokens, timeout: Duration = .seconds(300)) {
        self.baseURL = baseURL
        self.apiKey = apiKey
        self.capField = capField
        self.timeout = timeout
    }

    /// The URL and settings, never the key.
    public var description: String { "AIUpstream(\(baseURL), key: \(apiKey == nil ? "none" : "set"), cap: \(capField.rawValue))" }
}
