import ArgumentParser
import Foundation
import TallyServer

/// Options shared by the commands that open the database.
struct StoreOptions: ParsableArguments {
    @Option(name: .customLong("data-dir"), help: "Directory of the embedded database and the generated admin key.")
    var dataDirectory = "tally-data"

    /// The configuration from these options and the environment
    /// (`DATABASE_URL`, `TALLY_CONFIG`, `TALLY_ADMIN_KEY`, `TALLY_SIGNING_KEY`, `TALLY_POSTGRES_POOL`).
    func configuration(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> TallyConfiguration {
        var configuration = TallyConfiguration()
        configuration.dataDirectory = dataDirectory
        if let url = environment["DATABASE_URL"], !url.isEmpty { configuration.databaseURL = url }
        if let pool = environment["TALLY_POSTGRES_POOL"] {
            guard let size = Int(pool), size >= 1 else { throw ValidationError("TALLY_POSTGRES_POOL must be a positive integer") }
            configuration.postgresPoolSize = size
        }
        if let path = environment["TALLY_CONFIG"], !path.isEmpty {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw ValidationError("cannot read TALLY_CONFIG file \(path)")
            }
            configuration.metering = try MeteringConfiguration(yaml: text)
            configuration.limits = try LimitsConfiguration(yaml: text)
            configuration.sync = try SyncConfiguration(yaml: text, catalog: configuration.metering.catalog)
            configuration.ai = try AIConfiguration(yaml: text, catalog: configuration.metering.catalog, environment: environment)
        }
        configuration.adminKey = environment["TALLY_ADMIN_KEY"]
        if let keys = environment["TALLY_SIGNING_KEY"], !keys.isEmpty {
            do { configuration.signingKeys = try SigningKeys(parsing: keys) } catch { throw ValidationError("TALLY_SIGNING_KEY: \(error)") }
        }
        return configuration
    }
}
