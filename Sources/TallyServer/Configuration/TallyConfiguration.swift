import Foundation
import TallyPostgres
import TallyStore

/// Everything `tally serve` can be told. Defaults run an embedded server on 127.0.0.1:8080.
public struct TallyConfiguration: Sendable {
    /// Address to bind.
    public var host = "127.0.0.1"
    /// Port to bind (0: any free port).
    public var port = 8080
    /// Listen backlog; raise it (and the kernel's `somaxconn`) for many simultaneous connects.
    public var backlog = 256
    /// Address of the admin listener (`/metrics`, `/admin/v1/*`): loopback unless operators reach it otherwise.
    public var adminHost = "127.0.0.1"
    /// Port of the admin listener (0: any free port).
    public var adminPort = 9090
    /// Timeouts and connection caps of both listeners.
    public var connections = ConnectionSettings()
    /// Where the embedded database and generated admin key live.
    public var dataDirectory = "tally-data"
    /// `postgres://user:pass@host:port/db` to use PostgreSQL instead of the embedded SQLite.
    public var databaseURL: String?
    /// The most PostgreSQL connections per server process (`TALLY_POSTGRES_POOL`), opened as needed and closed after
    /// a minute unused (one is kept).
    public var postgresPoolSize = PostgresPool.Configuration.defaultSize
    /// How long a request waits for one of those connections when all are in use (`TALLY_POSTGRES_LEASE_TIMEOUT`)
    /// before it answers 503: a few seconds, well under the request timeout.
    public var postgresLeaseTimeout = PostgresPool.Configuration.defaultAcquireTimeout
    /// Where the event listener (`LISTEN`) and migrations connect (`TALLY_LISTEN_DATABASE_URL`): PostgreSQL itself or a
    /// pooler in session mode, when ``databaseURL`` goes through a transaction pooler; `nil`: ``databaseURL``.
    public var listenDatabaseURL: String?
    /// How the PostgreSQL store sends its hot statements (`TALLY_POSTGRES_STATEMENTS`): prepared once per
    /// connection, or unnamed (through a transaction pooler).
    public var postgresStatements = PostgresStatements.prepared
    /// The key of the admin API; ``AdminKey/resolve(configured:dataDirectory:)`` fills it in.
    public var adminKey: String?
    /// The keys access tokens are signed with (`TALLY_SIGNING_KEY`); `nil`: those of `<dataDirectory>/signing-keys`,
    /// created on first start (see ``SigningKeys``).
    public var signingKeys: SigningKeys?
    /// Quotas, actions and sign-up rules.
    public var metering = MeteringConfiguration()
    /// Rate limits, the sign-in lockout, sessions per user and trusted proxies (the file's `limits:` section).
    public var limits = LimitsConfiguration()
    /// Synced collections and how long their tombstones are kept (the file's `collections:` and
    /// `tombstoneRetentionDays:`).
    public var sync = SyncConfiguration()
    /// The AI gateway (the file's `ai:` section); `nil`: no `/v1/ai` routes.
    public var ai: AIConfiguration?
    /// The mail hook that sends password reset and email verification codes (the file's `mail:` section); `nil`: no mail.
    public var mail: MailConfiguration?
    /// App Store purchases (the file's `appStore:` section); `nil`: no purchase routes.
    public var appStore: AppStoreConfiguration?
    /// Sign in with Apple (the file's `signInWithApple:` section); `nil`: no `POST /v1/auth/apple`.
    public var signInWithApple: SignInWithAppleConfiguration?
    /// App Attest (the file's `appAttest:` section); `nil`: no attestation routes, nothing checked.
    public var appAttest: AppAttestConfiguration?
    /// DeviceCheck (the file's `deviceCheck:` section); `nil`: device tokens are ignored.
    public var deviceCheck: DeviceCheckConfiguration?
    /// Lifetime of access tokens.
    public var accessTokenTTL: TimeInterval = 15 * 60
    /// Lifetime of refresh tokens.
    public var refreshTokenTTL: TimeInterval = 30 * 24 * 3600
    /// bcrypt cost for passwords (12 in production; tests lower it).
    public var bcryptCost: UInt8 = 12
    /// How often expired holds of idle accounts are swept.
    public var housekeepingInterval: Duration = .seconds(1)

    /// The defaults.
    public init() {}
}

/// Quotas, actions and sign-up rules: the top-level keys `signupGrant`, `guestSignupsPerIPPerHour`, `quotas` and
/// `actions` of the configuration file.
public struct MeteringConfiguration: Sendable {
    /// The quotas, actions and sign-up grant.
    public var catalog: Catalog = .standard
    /// New guest accounts allowed per client IP per hour.
    public var guestSignupsPerIPPerHour = 30

    /// The default: ``Catalog/standard``, 30 guest sign-ups per IP per hour.
    public init() {}
}

/// A configuration that cannot be used; the message says what to fix (one line per problem).
public struct ConfigurationError: Error, CustomStringConvertible {
    /// What is wrong.
    public var description: String
    /// Creates the error.
    public init(_ description: String) { self.description = description }
}

/// The admin key: `TALLY_ADMIN_KEY` when set, else generated once and kept in the data directory.
public enum AdminKey {
    /// The key to use, and whether it was just generated (so the caller prints it once).
    public static func resolve(configured: String?, dataDirectory: String) throws -> (key: String, generated: Bool) {
        if let configured, !configured.isEmpty {
            try validate(configured)
            return (configured, false)
        }
        let path = (dataDirectory as NSString).appendingPathComponent("admin-key")
        if let existing = try? String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines),
            !existing.isEmpty
        {
            return (existing, false)
        }
        let key = "tally_admin_" + Secrets.random(bytes: 24)
        try DataDirectory.prepare(dataDirectory)
        try DataDirectory.writePrivate(Data((key + "\n").utf8), to: path)
        return (key, true)
    }

    /// Refuses a configured key that is too short to be secret.
    public static func validate(_ configured: String) throws {
        guard configured.utf8.count >= 16 else { throw ConfigurationError("TALLY_ADMIN_KEY must be at least 16 characters") }
    }
}
