import Foundation
import TallyStore
import Yams

extension TallyConfiguration {
    /// The defaults, with the settings of a configuration file (`TALLY_CONFIG`): YAML, or JSON (which is YAML).
    ///
    /// Every key is optional unless its object needs it (a quota's `name`), and keeps its default when absent.
    /// A key the file format does not have is refused wherever it is — the top level, an action, `limits` or
    /// any object in it, a collection, `ai` or any object in it — with where it is and the nearest known key
    /// (`unknown key "token" in actions[0]; did you mean "tokens"?`): a misspelt setting never silently stays
    /// at its default. `environment` gives the AI upstream's key (the variable `ai.upstream.apiKeyEnv` names) and the
    /// mail hook's secret (`mail.secretEnv`).
    ///
    /// ```yaml
    /// signupGrant: 0
    /// quotas: [{name: readings, daily: 3}]
    /// actions: [{name: reading, quota: readings, tokens: 5}, {name: ai.query, tokens: 3}]
    /// limits: {sessionsPerUser: 20}
    /// collections: [{name: habit_logs, rangeKey: date}]
    /// ```
    ///
    /// Files the configuration names (`appStore.rootCertificates`) are read relative to `directory` (the
    /// configuration file's own; nil: the working directory).
    public init(file text: String, environment: [String: String], directory: URL? = nil) throws {
        self.init()
        try ConfigurationDecoding.decode(ConfigurationFile.self, from: text).apply(to: &self, environment: environment, directory: directory)
    }

    /// The settings a configuration file can give, as they are in effect (defaults included), written as a
    /// configuration file (YAML) that gives exactly them. The AI upstream's key and the mail hook's secret
    /// are not in it: only the names of the variables they are read from.
    public var effectiveFile: String {
        (try? YAMLEncoder().encode(ConfigurationFile(effective: self))) ?? ""
    }
}

/// The configuration file as written: one property per key, an entry struct per object (in the file of the
/// setting it configures: ``LimitsConfiguration/File``, ``SyncConfiguration/CollectionEntry``,
/// ``AIConfiguration/File``). A key is accepted because a property declares it (``ConfigurationDecoding``);
/// `apply` turns the file into the configuration, `init(effective:)` writes a configuration back.
struct ConfigurationFile: Codable, Equatable {
    var signupGrant: Int64?
    var guestSignupsPerIPPerHour: Int?
    var quotas: [Quota]?
    var actions: [Action]?
    var limits: LimitsConfiguration.File?
    var collections: [SyncConfiguration.CollectionEntry]?
    var tombstoneRetentionDays: Int?
    var maxStoredDocumentsPerUser: Int?
    var maxStoredBytesPerUser: Int?
    var maxClientIdsPerUser: Int?
    var ai: AIConfiguration.File?
    var mail: MailConfiguration.File?
    var appStore: AppStoreConfiguration.File?
    var signInWithApple: SignInWithAppleConfiguration.File?
    var appAttest: AppAttestConfiguration.File?
    var deviceCheck: DeviceCheckConfiguration.File?

    /// `{name: readings, daily: 3}`.
    struct Quota: Codable, Equatable {
        var name: String
        var daily: Int
    }

    /// `{name: reading, quota: readings, tokens: 5}`.
    struct Action: Codable, Equatable {
        var name: String
        var quota: String?
        var tokens: Int64?
    }

    /// Sets every setting the file can give: the file's value, or the default when it has none.
    func apply(to configuration: inout TallyConfiguration, environment: [String: String], directory: URL?) throws {
        let standard = Catalog.standard
        do {
            configuration.metering.catalog = try Catalog(
                signupGrant: signupGrant ?? 0,
                quotas: quotas?.map { QuotaSpec(name: $0.name, daily: $0.daily) } ?? standard.quotas,
                actions: actions?.map { ActionSpec(name: $0.name, quota: $0.quota, tokens: $0.tokens) } ?? standard.actions)
        } catch {
            throw ConfigurationError(error.description)
        }
        configuration.metering.guestSignupsPerIPPerHour = guestSignupsPerIPPerHour ?? MeteringConfiguration().guestSignupsPerIPPerHour
        guard configuration.metering.guestSignupsPerIPPerHour >= 1 else {
            throw ConfigurationError("guestSignupsPerIPPerHour must be at least 1")
        }
        configuration.limits = try limits?.configuration() ?? LimitsConfiguration()
        configuration.sync = try SyncConfiguration(
            collections: collections ?? [], tombstoneRetentionDays: tombstoneRetentionDays,
            maxStoredDocumentsPerUser: maxStoredDocumentsPerUser, maxStoredBytesPerUser: maxStoredBytesPerUser,
            maxClientIdsPerUser: maxClientIdsPerUser, catalog: configuration.metering.catalog)
        configuration.ai = try ai?.configuration(catalog: configuration.metering.catalog, environment: environment)
        configuration.mail = try mail?.configuration(environment: environment)
        configuration.appStore = try appStore?.configuration(directory: directory, environment: environment)
        configuration.signInWithApple = try signInWithApple?.configuration(environment: environment)
        configuration.appAttest = try appAttest?.configuration(directory: directory)
        configuration.deviceCheck = try deviceCheck?.configuration(environment: environment, now: { Date() })
    }

    /// The file that gives exactly `configuration`'s settings.
    init(effective configuration: TallyConfiguration) {
        let catalog = configuration.metering.catalog
        signupGrant = catalog.signupGrant
        guestSignupsPerIPPerHour = configuration.metering.guestSignupsPerIPPerHour
        quotas = catalog.quotas.map { Quota(name: $0.name, daily: $0.daily) }
        actions = catalog.actions.map { Action(name: $0.name, quota: $0.quota, tokens: $0.tokens) }
        limits = LimitsConfiguration.File(effective: configuration.limits)
        collections = configuration.sync.collections.map(SyncConfiguration.CollectionEntry.init(effective:))
        tombstoneRetentionDays = configuration.sync.tombstoneRetentionDays
        maxStoredDocumentsPerUser = configuration.sync.budget.documents
        maxStoredBytesPerUser = configuration.sync.budget.bytes
        maxClientIdsPerUser = configuration.sync.budget.clientIds
        ai = configuration.ai.map { AIConfiguration.File(effective: $0, catalog: catalog) }
        mail = configuration.mail.map(MailConfiguration.File.init(effective:))
        appStore = configuration.appStore.map(AppStoreConfiguration.File.init(effective:))
        signInWithApple = configuration.signInWithApple.map(SignInWithAppleConfiguration.File.init(effective:))
        appAttest = configuration.appAttest.map(AppAttestConfiguration.File.init(effective:))
        deviceCheck = configuration.deviceCheck.map(DeviceCheckConfiguration.File.init(effective:))
    }
}
