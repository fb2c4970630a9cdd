import Foundation
import TallyAppleID

/// Sign in with Apple (the configuration file's `signInWithApple:` section): which apps' identity tokens are accepted,
/// where Apple's keys are fetched, and — optionally — the key that exchanges an authorization code for the refresh
/// token that account deletion revokes. Absent: no `POST /v1/auth/apple`.
///
/// ```yaml
/// signInWithApple:
///   audiences: [com.example.oracle]
///   teamId: ABCDE12345
///   keyId: XYZ987
///   clientId: com.example.oracle
///   privateKeyEnv: TALLY_APPLE_KEY
/// ```
public struct SignInWithAppleConfiguration: Sendable {
    /// The bundle ids and Services IDs accepted as a token's `aud`.
    public var audiences: [String]
    /// Where Apple's keys are fetched (cached; fetched again on an unknown `kid`).
    public var keysURL: String
    /// The code exchange and revocation settings, when configured.
    public var tokenSettings: AppleTokenClient.Configuration?
    /// The environment variable the `.p8` key was read from.
    public var privateKeyEnv: String?
    /// Verifies identity tokens and Apple's account notifications (its key cache is shared by every copy).
    public let verifier: AppleIdentityVerifier
    /// Exchanges authorization codes and revokes refresh tokens; nil without `teamId`, `keyId`, `clientId` and a key.
    public let tokens: AppleTokenClient?

    /// A configuration accepting `audiences`, with Apple's keys from `keysURL`; with `tokenSettings` and the `.p8`
    /// key's PEM, codes are exchanged and refresh tokens revoked. Throws ``ConfigurationError``.
    public init(
        audiences: [String], keysURL: String = AppleKeyFetcher.appleKeysURL, tokenSettings: AppleTokenClient.Configuration? = nil,
        privateKeyPEM: String? = nil, privateKeyEnv: String? = nil
    ) throws {
        self.audiences = audiences
        self.keysURL = keysURL
        self.tokenSettings = tokenSettings
        self.privateKeyEnv = privateKeyEnv
        do {
            verifier = try AppleIdentityVerifier(audiences: Set(audiences), keys: AppleKeyCache(fetcher: AppleKeyFetcher(url: keysURL)))
            if let tokenSettings, let privateKeyPEM {
                tokens = try AppleTokenClient(configuration: tokenSettings, privateKeyPEM: privateKeyPEM)
            } else {
                tokens = nil
            }
        } catch {
            throw ConfigurationError("signInWithApple: \(error)")
        }
    }

    /// The `signInWithApple:` section as written. The key is read from the variable `privateKeyEnv` names.
    struct File: Codable, Equatable {
        var audiences: [String]
        var keysURL: String?
        var teamId: String?
        var keyId: String?
        var clientId: String?
        var privateKeyEnv: String?
        var tokenURL: String?
        var revokeURL: String?

        /// The section that gives exactly `configuration` (its key by the variable it was read from).
        init(effective configuration: SignInWithAppleConfiguration) {
            audiences = configuration.audiences
            keysURL = configuration.keysURL
            let settings = configuration.tokenSettings
            (teamId, keyId, clientId) = (settings?.teamId, settings?.keyId, settings?.clientId)
            (tokenURL, revokeURL) = (settings?.tokenURL, settings?.revokeURL)
            privateKeyEnv = configuration.privateKeyEnv
        }

        /// The configuration, its key read from `environment`.
        func configuration(environment: [String: String]) throws -> SignInWithAppleConfiguration {
            guard !audiences.isEmpty, audiences.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 255 }) else {
                throw ConfigurationError("signInWithApple.audiences must list the app's bundle id (and any Services ID)")
            }
            for (name, url) in [("keysURL", keysURL), ("tokenURL", tokenURL), ("revokeURL", revokeURL)] {
                if let url { try ConfigurationChecks.requireHTTPS(url, place: "signInWithApple.\(name)") }
            }
            let named = [teamId, keyId, clientId, privateKeyEnv].compactMap { $0 }
            guard named.isEmpty || named.count == 4 else {
                throw ConfigurationError(
                    "signInWithApple: teamId, keyId, clientId and privateKeyEnv go together (the code exchange and revocation need all four)")
            }
            guard let teamId, let keyId, let clientId, let privateKeyEnv else {
                guard tokenURL == nil, revokeURL == nil else {
                    throw ConfigurationError("signInWithApple.tokenURL and revokeURL need teamId, keyId, clientId and privateKeyEnv")
                }
                return try SignInWithAppleConfiguration(audiences: audiences, keysURL: keysURL ?? AppleKeyFetcher.appleKeysURL)
            }
            let pem = try ConfigurationChecks.environmentValue(privateKeyEnv, namedBy: "signInWithApple.privateKeyEnv", in: environment)
            var settings = AppleTokenClient.Configuration(teamId: teamId, keyId: keyId, clientId: clientId)
            if let tokenURL { settings.tokenURL = tokenURL }
            if let revokeURL { settings.revokeURL = revokeURL }
            return try SignInWithAppleConfiguration(
                audiences: audiences, keysURL: keysURL ?? AppleKeyFetcher.appleKeysURL, tokenSettings: settings, privateKeyPEM: pem,
                privateKeyEnv: privateKeyEnv)
        }
    }
}
