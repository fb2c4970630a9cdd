import Foundation

/// Reads and checks several sections of the configuration file share; each problem is a ``ConfigurationError``
/// naming the key (`place`, such as `deviceCheck.privateKeyEnv`).
enum ConfigurationChecks {
    /// The value of the environment variable `variable`, which the key `place` names; unset or empty is refused.
    static func environmentValue(_ variable: String, namedBy place: String, in environment: [String: String]) throws -> String {
        guard let value = environment[variable], !value.isEmpty else {
            throw ConfigurationError("\(place) names \(variable), which is not set in the environment")
        }
        return value
    }

    /// Refuses `url`, the key `place`'s value, unless it is an https URL, or an http one to a loopback address.
    static func requireHTTPS(_ url: String, place: String) throws {
        guard let parsed = URL(string: url), parsed.scheme == "https" || (parsed.scheme == "http" && isLoopback(parsed.host)) else {
            throw ConfigurationError("\(place) must be an https URL (or http to loopback), found \"\(url)\"")
        }
    }

    /// Whether `host` is a loopback address or `localhost`.
    static func isLoopback(_ host: String?) -> Bool { ["127.0.0.1", "localhost", "::1", "[::1]"].contains(host ?? "") }

    /// The contents of the files `paths` (the key `place`'s), each read relative to `directory` unless absolute
    /// (nil: the working directory).
    static func readFiles(_ paths: [String], relativeTo directory: URL?, place: String) throws -> [Data] {
        try paths.map { path in
            let url = path.hasPrefix("/") || directory == nil ? URL(fileURLWithPath: path) : directory!.appendingPathComponent(path)
            guard let data = try? Data(contentsOf: url) else { throw ConfigurationError("\(place): cannot read \(url.path)") }
            return data
        }
    }
}
