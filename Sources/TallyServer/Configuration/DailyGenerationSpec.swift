import Foundation
import TallyAPI
import TallyStore

/// A generation computed once per user and local day (`ai.dailyGenerations` in `TALLY_CONFIG`), served by
/// `GET /v1/ai/daily/{name}`.
public struct DailyGenerationSpec: Sendable {
    /// The name in the path.
    public var name: String
    /// The gateway model (an `ai.models` name) that writes it.
    public var model: AIModelSpec
    /// The prompt, with its placeholders.
    public var prompt: PromptTemplate
    /// What one generation costs: a catalog action (its quota first, then its tokens), or a quota-only action on a
    /// catalog quota.
    public var action: ActionSpec
    /// The daily limit of the action's quota, if it has one.
    public var quotaLimit: Int?
    /// Query parameters the prompt may use (`{{sign}}`), each required.
    public var params: [String]
    /// The synced document whose top-level fields the prompt may use as `{{profile.<field>}}`: `collection/id`.
    public var profileDocument: (collection: String, id: String)?

    /// One entry as written.
    struct Entry: Codable, Equatable {
        var name: String
        var model: String
        var prompt: String
        var action: String?
        var quota: String?
        var params: [String]?
        var profileDocument: String?

        /// The entry that declares exactly `spec`: by its action when that is one of `catalog`'s, else by its quota.
        init(effective spec: DailyGenerationSpec, catalog: Catalog) {
            (name, model, prompt, params) = (spec.name, spec.model.name, spec.prompt.text, spec.params.isEmpty ? nil : spec.params)
            if catalog.action(named: spec.action.name) == spec.action { action = spec.action.name } else { quota = spec.action.quota }
            profileDocument = spec.profileDocument.map { "\($0.collection)/\($0.id)" }
        }

        func spec(catalog: Catalog, models: [AIModelSpec], place: String) throws -> DailyGenerationSpec {
            guard CollectionSpec.isValidName(name) else { throw ConfigurationError("\(place): not a valid name ([a-z][a-z0-9_.-]{0,63})") }
            guard let model = models.first(where: { $0.name == self.model }) else {
                throw ConfigurationError("\(place): no model named '\(self.model)' in ai.models")
            }
            let params = self.params ?? []
            for param in params where !PromptTemplate.isValidParameter(param) {
                throw ConfigurationError("\(place): parameter '\(param)' must be [a-z][a-z0-9_]{0,31}")
            }
            let profile = try profileDocument.map { path -> (collection: String, id: String) in
                let parts = path.split(separator: "/", omittingEmptySubsequences: false)
                guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                    throw ConfigurationError("\(place): profileDocument must be collection/id, such as profile/me")
                }
                return (String(parts[0]), String(parts[1]))
            }
            let template = try PromptTemplate(prompt, params: params, hasProfile: profile != nil, place: place)
            var action = ActionSpec(name: "ai.daily." + name)
            var quotaLimit: Int?
            switch (self.action, quota) {
            case (let name?, nil):
                guard let resolved = catalog.action(named: name) else { throw ConfigurationError("\(place): no action named '\(name)'") }
                action = resolved
                quotaLimit = resolved.quota.flatMap { catalog.quota(named: $0)?.daily }
            case (nil, let quota?):
                guard let limit = catalog.quota(named: quota)?.daily else { throw ConfigurationError("\(place): no quota named '\(quota)'") }
                action.quota = quota
                quotaLimit = limit
            case (nil, nil):
                throw ConfigurationError("\(place): give an action or a quota (each generation is a model call the app pays for)")
            case (_?, _?):
                throw ConfigurationError("\(place): give an action or a quota, not both (an action has its own quota)")
            }
            return DailyGenerationSpec(
                name: name, model: model, prompt: template, action: action, quotaLimit: quotaLimit, params: params,
                profileDocument: profile)
        }
    }
}

/// A prompt with `{{placeholders}}`: `date` (the user's local day), `timezone`, `language`, a declared request
/// parameter, or `profile.<field>` (a top-level field of the configured profile document; empty when absent).
public struct PromptTemplate: Sendable, Hashable {
    /// A piece of the prompt.
    enum Piece: Sendable, Hashable {
        case text(String)
        case date, timezone, language
        case parameter(String)
        case profile(String)
    }

    let pieces: [Piece]
    /// The prompt as written.
    let text: String

    /// Parses `text`; a placeholder that is not one of the above is refused.
    init(_ text: String, params: [String], hasProfile: Bool, place: String) throws {
        self.text = text
        var pieces: [Piece] = []
        var rest = Substring(text)
        while let open = rest.range(of: "{{") {
            pieces.append(.text(String(rest[..<open.lowerBound])))
            guard let close = rest[open.upperBound...].range(of: "}}") else {
                throw ConfigurationError("\(place): the prompt has a '{{' without '}}'")
            }
            let name = rest[open.upperBound..<close.lowerBound].trimmingCharacters(in: .whitespaces)
            switch name {
            case "date": pieces.append(.date)
            case "timezone": pieces.append(.timezone)
            case "language": pieces.append(.language)
            case _ where name.hasPrefix("profile.") && hasProfile && name.count > 8: pieces.append(.profile(String(name.dropFirst(8))))
            case _ where params.contains(name): pieces.append(.parameter(name))
            default:
                throw ConfigurationError(
                    "\(place): unknown placeholder {{\(name)}} (date, timezone, language, a declared param, or profile.<field> with a profileDocument)")
            }
            rest = rest[close.upperBound...]
        }
        pieces.append(.text(String(rest)))
        self.pieces = pieces.filter { $0 != .text("") }
    }

    /// Whether `name` can be a request parameter.
    static func isValidParameter(_ name: String) -> Bool {
        guard let first = name.utf8.first, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first), name.utf8.count <= 32 else { return false }
        return name.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F }
    }

    /// Whether the prompt reads the profile document.
    var readsProfile: Bool { pieces.contains { if case .profile = $0 { return true } else { return false } } }

    /// The prompt for one user and day.
    func render(day: String, user: UserRecord, parameters: [String: String], profile: JSONValue?) -> String {
        pieces.map { piece in
            switch piece {
            case .text(let text): return text
            case .date: return day
            case .timezone: return user.timezone
            case .language: return user.language ?? ""
            case .parameter(let name): return parameters[name] ?? ""
            case .profile(let field):
                switch profile?[field] {
                case .string(let text)?: return text
                case .number(let number)?: return number
                case .bool(let flag)?: return flag ? "true" : "false"
                default: return ""
                }
            }
        }.joined()
    }
}
