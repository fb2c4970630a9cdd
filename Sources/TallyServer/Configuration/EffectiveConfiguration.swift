import Foundation
import TallyPostgres

extension TallyConfiguration {
    /// Every setting with the value it has, defaults included, for `tally serve --check-config`: the server's
    /// own settings (options and environment) as comment lines, then ``effectiveFile``. Secrets appear only as
    /// set or unset: the admin key, the signing keys, the AI upstream's key, the mail hook's secret, and the
    /// passwords of `DATABASE_URL` and `TALLY_LISTEN_DATABASE_URL`.
    public var effectiveDescription: String {
        let seconds: (Duration) -> String = { "\($0.components.seconds) s" }
        let url = databaseURL.map(Self.redacted) ?? "unset: SQLite in \((dataDirectory as NSString).appendingPathComponent("tally.sqlite"))"
        let adminKey = self.adminKey == nil ? "unset: the one in <data-dir>/admin-key, generated on first start" : "set"
        let signing: String
        if let keys = signingKeys?.keys {
            signing = "set, \(keys.count) key\(keys.count == 1 ? "" : "s") (the first signs)"
        } else {
            signing = "unset: those in <data-dir>/signing-keys, generated on first start"
        }
        var settings: [(String, String)] = [
            ("host (--host)", host), ("port (--port)", "\(port)"), ("backlog (--backlog)", "\(backlog)"),
            ("adminHost (--admin-host)", adminHost), ("adminPort (--admin-port)", "\(adminPort)"),
            ("idleTimeout (--idle-timeout)", seconds(connections.idleTimeout)),
            ("headerTimeout (--header-timeout)", seconds(connections.headerTimeout)),
            ("requestTimeout (--request-timeout)", seconds(connections.requestTimeout)),
            ("maxConnections (--max-connections)", connections.maxConnections.map { "\($0)" } ?? "from the open-file limit"),
            ("maxConnectionsPerIP (--max-connections-per-ip)", "\(connections.maxConnectionsPerIP)"),
            ("dataDirectory (--data-dir)", dataDirectory),
            ("databaseURL (DATABASE_URL)", url),
            ("postgresPoolSize (TALLY_POSTGRES_POOL)", "\(postgresPoolSize)" + (databaseURL == nil ? " (unused with SQLite)" : "")),
            ("postgresLeaseTimeout (TALLY_POSTGRES_LEASE_TIMEOUT)",
             Self.decimalSeconds(postgresLeaseTimeout) + (databaseURL == nil ? " (unused with SQLite)" : "")),
            ("listenDatabaseURL (TALLY_LISTEN_DATABASE_URL)",
             listenDatabaseURL.map(Self.redacted) ?? "unset: DATABASE_URL" + (databaseURL == nil ? " (unused with SQLite)" : "")),
            ("postgresStatements (TALLY_POSTGRES_STATEMENTS)", postgresStatements.rawValue + (databaseURL == nil ? " (unused with SQLite)" : "")),
            ("adminKey (TALLY_ADMIN_KEY)", adminKey),
            ("signingKeys (TALLY_SIGNING_KEY)", signing),
            ("accessTokenTTL", "\(Int(accessTokenTTL)) s"), ("refreshTokenTTL", "\(Int(refreshTokenTTL)) s"),
            ("bcryptCost", "\(bcryptCost)"), ("housekeepingInterval", seconds(housekeepingInterval)),
        ]
        if let upstream = ai?.upstream, let variable = upstream.apiKeyEnv {
            settings.append(("AI upstream key (\(variable))", upstream.apiKey == nil ? "unset" : "set"))
        }
        if let mail {
            settings.append(("mail hook secret (\(mail.secretEnv))", mail.secret.isEmpty ? "unset" : "set"))
        } else {
            settings.append(("mail hook", "none: no mail is sent (password reset and email verification codes)"))
        }
        if let apple = signInWithApple, let variable = apple.privateKeyEnv {
            settings.append(("Sign in with Apple key (\(variable))", apple.tokens == nil ? "unset" : "set"))
        }
        let width = settings.map(\.0.count).max() ?? 0
        let lines = settings.map { name, value in
            let padded = name.padding(toLength: width, withPad: " ", startingAt: 0)
            return "#   \(padded)  \(value)"
        }
        return (["# The server (options and environment):"] + lines + ["# The configuration file (TALLY_CONFIG), in effect:", effectiveFile])
            .joined(separator: "\n")
    }

    /// `duration` as seconds, fractions kept (`5 s`, `0.25 s`).
    static func decimalSeconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return String(format: "%g s", Double(seconds) + Double(attoseconds) / 1e18)
    }

    /// What would stop the server at start in the settings that do not come from the configuration file,
    /// found without starting anything nor touching the database: the form of `DATABASE_URL`, the length of
    /// `TALLY_ADMIN_KEY`. (`TALLY_SIGNING_KEY` is checked as it is parsed, ``SigningKeys/init(parsing:)``.)
    public var environmentProblems: [String] {
        var problems: [String] = []
        if let databaseURL {
            do {
                _ = try PostgresStore.configuration(url: databaseURL, maximumConnections: postgresPoolSize)
            } catch {
                problems.append("DATABASE_URL: \(error)")
            }
        }
        if let listenDatabaseURL {
            do {
                _ = try PostgresStore.configuration(url: listenDatabaseURL, maximumConnections: 1)
            } catch {
                problems.append("TALLY_LISTEN_DATABASE_URL: \(error)")
            }
            if databaseURL == nil { problems.append("TALLY_LISTEN_DATABASE_URL is set without DATABASE_URL") }
        }
        if let adminKey {
            do { try AdminKey.validate(adminKey) } catch { problems.append("\(error)") }
        }
        return problems
    }

    /// `url` with its password replaced; not a URL at all: only that it is set.
    static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.scheme != nil else { return "set (not a URL)" }
        if components.password != nil { components.password = "***" }
        return components.string ?? "set"
    }
}
