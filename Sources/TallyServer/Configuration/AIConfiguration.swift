import Foundation
import TallyAPI
import TallyStore

/// The AI gateway: the `ai:` key of the configuration file (`TALLY_CONFIG`). Absent: no `/v1/ai` routes.
///
/// ```yaml
/// ai:
///   upstream: {baseURL: "https://api.openai.com/v1", apiKeyEnv: OPENAI_API_KEY}
///   models:
///     - {name: chat, upstreamModel: gpt-4o-mini, promptTokensPerCredit: 1000, completionTokensPerCredit: 250, maxCompletionTokens: 1024}
///   maxConcurrentPerUser: 4
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

    /// A gateway to `upstream` offering `models`.
    public init(upstream: AIUpstream, models: [AIModelSpec], maxConcurrentPerUser: Int = 4, dailyGenerations: [DailyGenerationSpec] = []) {
        self.upstream = upstream
        self.models = models
        self.maxConcurrentPerUser = maxConcurrentPerUser
        self.dailyGenerations = dailyGenerations
    }

    /// The model clients call `name`.
    func model(named name: String) -> AIModelSpec? { models.first { $0.name == name } }

    /// The `ai:` section as written. The upstream's key is read from the environment variable `apiKeyEnv`
    /// names; a daily generation's `action` must be one of the catalog's and its `quota` one of its quotas.
    struct File: Codable, Equatable {
        var upstream: UpstreamEntry
        var models: [ModelEntry]
        var maxConcurrentPerUser: Int?
        var dailyGenerations: [DailyGenerationSpec.Entry]?

        /// The section that gives exactly `configuration` (whose daily generations draw on `catalog`).
        init(effective configuration: AIConfiguration, catalog: Catalog) {
            upstream = UpstreamEntry(effective: configuration.upstream)
            models = configuration.models.map(ModelEntry.init(effective:))
            maxConcurrentPerUser = configuration.maxConcurrentPerUser
            dailyGenerations = configuration.dailyGenerations.map { DailyGenerationSpec.Entry(effective: $0, catalog: catalog) }
        }

        func configuration(catalog: Catalog, environment: [String: String]) throws -> AIConfiguration {
            guard !models.isEmpty else { throw ConfigurationError("ai.models: declare at least one model") }
            var names = Set<String>()
            let specs = try models.enumerated().map { index, model in
                let spec = try model.spec(place: "ai.models[\(index)]")
                guard names.insert(spec.name).inserted else { throw ConfigurationError("ai.models[\(index)]: '\(spec.name)' is declared twice") }
                return spec
            }
            var configuration = AIConfiguration(upstream: try upstream.upstream(environment: environment), models: specs)
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
            var apiKey: String?
            if let apiKeyEnv {
                guard let value = environment[apiKeyEnv], !value.isEmpty else {
                    throw ConfigurationError("ai.upstream.apiKeyEnv names \(apiKeyEnv), which is not set in the environment")
                }
                apiKey = value
            }
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

        /// The entry that declares exactly `model`.
        init(effective model: AIModelSpec) {
            (name, upstreamModel, maxCompletionTokens) = (model.name, model.upstreamModel, model.maxCompletionTokens)
            (promptTokensPerCredit, completionTokensPerCredit) = (model.promptTokensPerCredit, model.completionTokensPerCredit)
        }

        func spec(place: String) throws -> AIModelSpec {
            guard !name.isEmpty, name.utf8.count <= 128 else { throw ConfigurationError("\(place): a name must be 1 to 128 bytes") }
            guard (1...1_000_000).contains(promptTokensPerCredit), (1...1_000_000).contains(completionTokensPerCredit) else {
                throw ConfigurationError("\(place) (\(name)): tokens per credit must be between 1 and 1000000")
            }
            guard (1...1_000_000).contains(maxCompletionTokens) else {
                throw ConfigurationError("\(place) (\(name)): maxCompletionTokens must be between 1 and 1000000")
            }
            return AIModelSpec(
                name: name, upstreamModel: upstreamModel, promptTokensPerCredit: promptTokensPerCredit,
                completionTokensPerCredit: completionTokensPerCredit, maxCompletionTokens: maxCompletionTokens)
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
