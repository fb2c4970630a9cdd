import Foundation
import TallyAppAttest

/// How a server treats App Attest and DeviceCheck verdicts.
public enum DeviceIntegrityMode: String, Sendable, Hashable, CaseIterable {
    /// Nothing is asked or checked.
    case off
    /// Verdicts are recorded (a metric, a flag on the user, a log line without secrets); nothing is refused.
    case monitor
    /// A spend of free value without a valid assertion is refused (`403 attestation_required`); paid calls still work.
    case enforce

    /// The mode a file names (the key `place`'s value; nil: `monitor`).
    init(file name: String?, place: String) throws {
        guard let mode = Self(rawValue: name ?? "monitor") else { throw ConfigurationError("\(place) must be off, monitor or enforce") }
        self = mode
    }
}

/// App Attest (the configuration file's `appAttest:` section): which app's keys are accepted, in which environment,
/// and what an unattested device may still have. Absent: no challenge or attestation routes, nothing checked.
///
/// ```yaml
/// appAttest:
///   teamId: ABCDE12345
///   bundleId: com.example.oracle
///   environment: production        # or development: the entitlement's value
///   mode: monitor                  # off | monitor | enforce
///   unattested: {freeUses: false, signupGrant: false}
/// ```
public struct AppAttestConfiguration: Sendable {
    /// The mode.
    public var mode: DeviceIntegrityMode
    /// Whether an unattested call may still use a free quota or daily generation (in `enforce`).
    public var unattestedFreeUses: Bool
    /// Whether an unattested guest still gets the sign-up grant (in `enforce`).
    public var unattestedSignupGrant: Bool
    /// The root certificate files given (`rootCertificates`, for tests); empty: Apple's, built in.
    public var rootCertificateFiles: [String]
    /// Verifies attestations and assertions.
    public let verifier: AppAttestVerifier

    /// A configuration for `teamId`.`bundleId` in `environment`, trusting `rootCertificates` (DER or PEM; empty:
    /// Apple's App Attestation root). Throws ``ConfigurationError``.
    public init(
        teamId: String, bundleId: String, environment: AppAttestEnvironment, mode: DeviceIntegrityMode,
        unattestedFreeUses: Bool = false, unattestedSignupGrant: Bool = false, rootCertificates: [Data] = [],
        rootCertificateFiles: [String] = []
    ) throws {
        self.mode = mode
        self.unattestedFreeUses = unattestedFreeUses
        self.unattestedSignupGrant = unattestedSignupGrant
        self.rootCertificateFiles = rootCertificateFiles
        do {
            verifier = try AppAttestVerifier(
                teamId: teamId, bundleId: bundleId, environment: environment,
                rootCertificates: rootCertificates.isEmpty ? nil : rootCertificates.map { Array($0) })
        } catch {
            throw ConfigurationError("appAttest: \(error)")
        }
    }

    /// Whether a spend of free value without a valid assertion is refused.
    public var refusesUnattested: Bool { mode == .enforce }

    /// The `appAttest:` section as written.
    struct File: Codable, Equatable {
        var teamId: String
        var bundleId: String
        var environment: String?
        var mode: String?
        var unattested: Unattested?
        var rootCertificates: [String]?

        /// `unattested: {freeUses, signupGrant}`.
        struct Unattested: Codable, Equatable {
            var freeUses: Bool?
            var signupGrant: Bool?
        }

        init(effective configuration: AppAttestConfiguration) {
            teamId = configuration.verifier.teamId
            bundleId = configuration.verifier.bundleId
            environment = configuration.verifier.environment.rawValue
            mode = configuration.mode.rawValue
            unattested = Unattested(freeUses: configuration.unattestedFreeUses, signupGrant: configuration.unattestedSignupGrant)
            rootCertificates = configuration.rootCertificateFiles.isEmpty ? nil : configuration.rootCertificateFiles
        }

        func configuration(directory: URL?) throws -> AppAttestConfiguration {
            guard let environment = AppAttestEnvironment(rawValue: environment ?? "production") else {
                throw ConfigurationError("appAttest.environment must be production or development")
            }
            let mode = try DeviceIntegrityMode(file: mode, place: "appAttest.mode")
            let roots = try ConfigurationChecks.readFiles(rootCertificates ?? [], relativeTo: directory, place: "appAttest.rootCertificates")
            return try AppAttestConfiguration(
                teamId: teamId, bundleId: bundleId, environment: environment, mode: mode,
                unattestedFreeUses: unattested?.freeUses ?? false, unattestedSignupGrant: unattested?.signupGrant ?? false,
                rootCertificates: roots, rootCertificateFiles: rootCertificates ?? [])
        }
    }
}

/// DeviceCheck (the configuration file's `deviceCheck:` section): the key that reads and writes each device's two
/// bits at Apple, and which bit means "this device already had its sign-up grant". Absent: device tokens are ignored.
///
/// ```yaml
/// deviceCheck:
///   keyId: ABC123DEFG
///   teamId: ABCDE12345
///   privateKeyEnv: TALLY_DEVICECHECK_KEY
///   url: https://api.devicecheck.apple.com   # development: https://api.development.devicecheck.apple.com
///   mode: enforce                           # monitor: record, still grant
///   signupGrantBit: 0
/// ```
public struct DeviceCheckConfiguration: Sendable {
    /// The mode: `enforce` gives no second sign-up grant to a device whose bit is set, nor one when Apple cannot say.
    public var mode: DeviceIntegrityMode
    /// The bit (0 or 1) meaning "this device already had its sign-up grant"; the other is left to the app.
    public var signupGrantBit: Int
    /// The environment variable the key was read from.
    public var privateKeyEnv: String
    /// Calls Apple.
    public let client: DeviceCheckClient

    /// A configuration calling Apple with `client`.
    public init(client: DeviceCheckClient, mode: DeviceIntegrityMode, signupGrantBit: Int = 0, privateKeyEnv: String) {
        self.client = client
        self.mode = mode
        self.signupGrantBit = signupGrantBit
        self.privateKeyEnv = privateKeyEnv
    }

    /// The `deviceCheck:` section as written. The key is read from the variable `privateKeyEnv` names.
    struct File: Codable, Equatable {
        var keyId: String
        var teamId: String
        var privateKeyEnv: String
        var url: String?
        var mode: String?
        var signupGrantBit: Int?

        init(effective configuration: DeviceCheckConfiguration) {
            keyId = configuration.client.configuration.keyId
            teamId = configuration.client.configuration.teamId
            privateKeyEnv = configuration.privateKeyEnv
            url = configuration.client.configuration.baseURL
            mode = configuration.mode.rawValue
            signupGrantBit = configuration.signupGrantBit
        }

        func configuration(environment: [String: String], now: @escaping @Sendable () -> Date) throws -> DeviceCheckConfiguration {
            let mode = try DeviceIntegrityMode(file: mode, place: "deviceCheck.mode")
            let bit = signupGrantBit ?? 0
            guard bit == 0 || bit == 1 else { throw ConfigurationError("deviceCheck.signupGrantBit must be 0 or 1") }
            let base = url ?? DeviceCheckClient.productionURL
            try ConfigurationChecks.requireHTTPS(base, place: "deviceCheck.url")
            let pem = try ConfigurationChecks.environmentValue(privateKeyEnv, namedBy: "deviceCheck.privateKeyEnv", in: environment)
            do {
                let settings = try DeviceCheckClient.Configuration(keyId: keyId, teamId: teamId, privateKeyPEM: pem, baseURL: base)
                return DeviceCheckConfiguration(
                    client: DeviceCheckClient(configuration: settings, now: now), mode: mode, signupGrantBit: bit,
                    privateKeyEnv: privateKeyEnv)
            } catch {
                throw ConfigurationError("deviceCheck: \(error)")
            }
        }
    }
}
