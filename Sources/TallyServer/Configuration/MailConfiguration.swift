import Foundation

/// The mail hook (the configuration file's `mail:` section): where the server POSTs each account mail — a password
/// reset or an email verification code — for a mail service, or a small function in front of one, to send.
///
/// ```yaml
/// mail: {webhookURL: "https://mail.example.com/tally", secretEnv: TALLY_MAIL_SECRET}
/// ```
///
/// Each mail is `POST <webhookURL>` with the JSON body `{"to", "template", "code", "expiresAt"}` and the header
/// `X-Tally-Signature: t=<unix seconds>,v1=<hex HMAC-SHA-256 of "<t>.<body>" under the secret>` (docs/identity.md,
/// "Account recovery", says how to check it). Without the section the server sends no mail: `POST /v1/auth/password/forgot`
/// still answers 202 and `POST /v1/auth/email/verify/send` answers 503 `mail_unavailable`.
public struct MailConfiguration: Sendable, CustomStringConvertible {
    /// The hook's URL (`https://…`; `http://` only to a loopback address, for a stand-in on the same machine).
    public var webhookURL: String
    /// The key every request is signed with; never logged nor written back.
    public var secret: String
    /// The environment variable the secret was read from (`mail.secretEnv`).
    public var secretEnv: String

    /// The shortest secret accepted: 32 bytes, as for the other keys a database dump must not give away.
    public static let minimumSecretBytes = 32

    /// A hook at `webhookURL` signing with `secret`.
    public init(webhookURL: String, secret: String, secretEnv: String = "TALLY_MAIL_SECRET") {
        self.webhookURL = webhookURL
        self.secret = secret
        self.secretEnv = secretEnv
    }

    /// The URL, never the secret.
    public var description: String { "MailConfiguration(\(webhookURL), secret from \(secretEnv))" }

    /// The `mail:` section as written. The secret is read from the variable `secretEnv` names (default `TALLY_MAIL_SECRET`).
    struct File: Codable, Equatable {
        var webhookURL: String
        var secretEnv: String?

        /// The section that gives exactly `mail` (its secret by the variable it was read from).
        init(effective mail: MailConfiguration) {
            (webhookURL, secretEnv) = (mail.webhookURL, mail.secretEnv)
        }

        func configuration(environment: [String: String]) throws -> MailConfiguration {
            guard let url = URL(string: webhookURL), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty,
                scheme == "https" || (scheme == "http" && ConfigurationChecks.isLoopback(host.lowercased()))
            else {
                throw ConfigurationError("mail.webhookURL must be an https URL (http only to 127.0.0.1, ::1 or localhost)")
            }
            let variable = secretEnv ?? "TALLY_MAIL_SECRET"
            let secret = try ConfigurationChecks.environmentValue(variable, namedBy: "mail.secretEnv", in: environment)
            guard secret.utf8.count >= MailConfiguration.minimumSecretBytes else {
                throw ConfigurationError("\(variable) must be at least \(MailConfiguration.minimumSecretBytes) bytes (a random secret)")
            }
            return MailConfiguration(webhookURL: webhookURL, secret: secret, secretEnv: variable)
        }
    }
}
