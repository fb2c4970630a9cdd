import Foundation
import TallyAPI
import TallyStore
import Yams

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

    /// Reads the `ai:` key of a configuration file, `nil` when it has none. The upstream's key is read from the
    /// environment variable `apiKeyEnv` names, in `environment`; a daily generation's `action` must be one of
    /// `catalog`'s and its `quota` one of its quotas.
    public init?(yaml text: String, catalog: Catalog, environment: [String: String]) throws {
        struct File: Decodable { var ai: Entry? }
        let file: File
        do {
            file = try YAMLDecoder().decode(File.self, from: text)
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw ConfigurationError("ai: not of the expected shape (upstream, models, maxConcurrentPerUser?, dailyGenerations?): \(error)")
        }
        guard let entry = file.ai else { return nil }
        self = try entry.configuration(catalog: catalog, environment: environment)
    }

    private struct Entry: Decodable {
        var upstream: UpstreamEntry
        var models: [ModelEntry]
        var maxConcurrentPerUser: Int?
        var dailyGenerations: [DailyGenerationSpec.Entry]?

        private enum CodingKeys: String, CodingKey, CaseIterable { case upstream, models, maxConcurrentPerUser, dailyGenerations }

        init(from decoder: any Decoder) throws {
            try ConfigurationError.refuseUnknownKeys(in: decoder, known: CodingKeys.allCases.map(\.rawValue), where: "in ai")
            let container = try decoder.container(keyedBy: CodingKeys.self)
            upstream = try container.decode(UpstreamEntry.self, forKey: .upstream)
            models = try container.decode([ModelEntry].self, forKey: .models)
            maxConcurrentPerUser = try container.decodeIfPresent(Int.self, forKey: .maxConcurrentPerUser)
            dailyGenerations = try container.decodeIfPresent([DailyGenerationSpec.Entry].self, forKey: .dailyGenerations)
        }

        func configuration(catalog: Catalog, environment: [String: String]) throws -> AIConfiguration {
            guard !models.isEmpty else { throw ConfigurationError("ai.models: declare at least one model") }
            var names = Set<String>()
            let specs = try models.map { model in
                let spec = try model.spec()
                guard names.insert(spec.name).inserted else { throw ConfigurationError("ai.models: '\(spec.name)' is declared twice") }
                return spec
            }
            var configuration = AIConfiguration(upstream: try upstream.upstream(environment: environment), models: specs)
            configuration.maxConcurrentPerUser = maxConcurrentPerUser ?? 4
            guard configuration.maxConcurrentPerUser >= 1 else { throw ConfigurationError("ai.maxConcurrentPerUser must be at least 1") }
            var generationNames = Set<String>()
            configuration.dailyGenerations = try (dailyGenerations ?? []).map { entry in
                let spec = try entry.spec(catalog: catalog, models: specs)
                guard generationNames.insert(spec.name).inserted else {
                    throw ConfigurationError("ai.dailyGenerations: '\(spec.name)' is declared twice")
                }
                return spec
            }
            return configuration
        }
    }

    private struct UpstreamEntry: Decodable {
        var baseURL: String
        var apiKeyEnv: String?
        var capField: String?
        var timeoutSeconds: Int?

        private enum CodingKeys: String, CodingKey, CaseIterable { case baseURL, apiKeyEnv, capField, timeoutSeconds }

        init(from decoder: any Decoder) throws {
            try ConfigurationError.refuseUnknownKeys(in: decoder, known: CodingKeys.allCases.map(\.rawValue), where: "in ai.upstream")
            let container = try decoder.container(keyedBy: CodingKeys.self)
            baseURL = try container.decode(String.self, forKey: .baseURL)
            apiKeyEnv = try container.decodeIfPresent(String.self, forKey: .apiKeyEnv)
            capField = try container.decodeIfPresent(String.self, forKey: .capField)
            timeoutSeconds = try container.decodeIfPresent(Int.self, forKey: .timeoutSeconds)
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
            return AIUpstream(
                baseURL: baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL, apiKey: apiKey, capField: cap,
                timeout: .seconds(timeout))
        }
    }

    private struct ModelEntry: Decodable {
        var name: String
        var upstreamModel: String?
        var promptTokensPerCredit: Int
        var completionTokensPerCredit: Int
        var maxCompletionTokens: Int

        private enum CodingKeys: String, CodingKey, CaseIterable {
            case name, upstreamModel, promptTokensPerCredit, completionTokensPerCredit, maxCompletionTokens
        }

        init(from decoder: any Decoder) throws {
            try ConfigurationError.refuseUnknownKeys(in: decoder, known: CodingKeys.allCases.map(\.rawValue), where: "in ai.models")
            let container = try decoder.container(keyedBy: CodingKeys.self)
            name = try container.decode(String.self, forKey: .name)
            upstreamModel = try container.decodeIfPresent(String.self, forKey: .upstreamModel)
            promptTokensPerCredit = try container.decode(Int.self, forKey: .promptTokensPerCredit)
            completionTokensPerCredit = try container.decode(Int.self, forKey: .completionTokensPerCredit)
            maxCompletionTokens = try container.decode(Int.self, forKey: .maxCompletionTokens)
        }

        func spec() throws -> AIModelSpec {
            guard !name.isEmpty, name.utf8.count <= 128 else { throw ConfigurationError("ai.models: a name must be 1 to 128 bytes") }
            guard (1...1_000_000).contains(promptTokensPerCredit), (1...1_000_000).contains(completionTokensPerCredit) else {
                throw ConfigurationError("ai.models: \(name): tokens per credit must be between 1 and 1000000")
            }
            guard (1...1_000_000).contains(maxCompletionTokens) else {
                throw ConfigurationError("ai.models: \(name): maxCompletionTokens must be between 1 and 1000000")
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
