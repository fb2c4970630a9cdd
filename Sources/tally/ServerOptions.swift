import ArgumentParser
import Foundation
import TallyPostgres
import TallyServer

/// Options shared by the commands that open the database.
struct StoreOptions: ParsableArguments {
    @Option(name: .customLong("data-dir"), help: "Directory of the embedded database and the generated admin key.")
    var dataDirectory = "tally-data"

    /// The configuration from these options and the environment
    /// (`DATABASE_URL`, `TALLY_LISTEN_DATABASE_URL`, `TALLY_POSTGRES_STATEMENTS`, `TALLY_CONFIG`, `TALLY_ADMIN_KEY`,
    /// `TALLY_SIGNING_KEY`, `TALLY_POSTGRES_POOL`, `TALLY_POSTGRES_LEASE_TIMEOUT`); the
    /// problems found, all of them, in one error.
    func configuration(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> TallyConfiguration {
        var problems: [String] = []
        let configuration = configuration(environment: environment, problems: &problems)
        guard problems.isEmpty else { throw ConfigurationError(problems.joined(separator: "\n")) }
        return configuration
    }

    /// The configuration from these options and the environment, as far as it can be read; what is wrong is
    /// added to `problems` (each setting that cannot be read keeps its default).
    func configuration(environment: [String: String], problems: inout [String]) -> TallyConfiguration {
        var configuration = TallyConfiguration()
        if let path = environment["TALLY_CONFIG"], !path.isEmpty {
            if let text = try? String(contentsOfFile: path, encoding: .utf8) {
                let directory = URL(fileURLWithPath: path).deletingLastPathComponent()
                do { configuration = try TallyConfiguration(file: text, environment: environment, directory: directory) } catch {
                    problems.append("TALLY_CONFIG (\(path)):\n\(error)")
                }
            } else {
                problems.append("TALLY_CONFIG: cannot read the file \(path)")
            }
        }
        configuration.dataDirectory = dataDirectory
        if let url = environment["DATABASE_URL"], !url.isEmpty { configuration.databaseURL = url }
        if let url = environment["TALLY_LISTEN_DATABASE_URL"], !url.isEmpty { configuration.listenDatabaseURL = url }
        if let mode = environment["TALLY_POSTGRES_STATEMENTS"], !mode.isEmpty {
            if let statements = PostgresStatements(rawValue: mode) { configuration.postgresStatements = statements } else {
                problems.append("TALLY_POSTGRES_STATEMENTS must be prepared or unnamed")
            }
        }
        if let pool = environment["TALLY_POSTGRES_POOL"] {
            if let size = Int(pool), size >= 1 { configuration.postgresPoolSize = size } else {
                problems.append("TALLY_POSTGRES_POOL must be a positive integer")
            }
        }
        if let lease = environment["TALLY_POSTGRES_LEASE_TIMEOUT"] {
            if let seconds = Double(lease), (0.001...60).contains(seconds) {
                configuration.postgresLeaseTimeout = .milliseconds(Int((seconds * 1000).rounded()))
            } else {
                problems.append("TALLY_POSTGRES_LEASE_TIMEOUT must be a number of seconds from 0.001 to 60")
            }
        }
        configuration.adminKey = environment["TALLY_ADMIN_KEY"].flatMap { $0.isEmpty ? nil : $0 }
        if let keys = environment["TALLY_SIGNING_KEY"], !keys.isEmpty {
            do { configuration.signingKeys = try SigningKeys(parsing: keys) } catch { problems.append("TALLY_SIGNING_KEY: \(error)") }
        }
        problems += configuration.environmentProblems
        return configuration
    }
}
