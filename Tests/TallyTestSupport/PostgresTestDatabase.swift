import Foundation
import Testing

/// The URL of the PostgreSQL database `scripts/test` provisions (`TALLY_TEST_DATABASE_URL`): the one way a
/// test reaches PostgreSQL, so that every PostgreSQL case follows one rule.
///
/// - With a database: its URL.
/// - Without one: a warning ("PostgreSQL case skipped: …"), counted in the run's summary, and the case is
///   cancelled (shown as skipped).
/// - Without one under `TALLY_REQUIRE_POSTGRES=1` (which `scripts/test` sets): an error, and a throw.
public func postgresURL(sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
    try PostgresTestDatabase.url(of: "TALLY_TEST_DATABASE_URL", sourceLocation: sourceLocation)
}

/// The same database through the cluster's Unix socket (`DATABASE_SOCKET_URL`, which `scripts/with-postgres`
/// always sets), under the same rule as ``postgresURL(sourceLocation:)``.
public func postgresSocketURL(sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
    try PostgresTestDatabase.url(of: "DATABASE_SOCKET_URL", sourceLocation: sourceLocation)
}

enum PostgresTestDatabase {
    static func url(of variable: String, sourceLocation: SourceLocation) throws -> String {
        let environment = ProcessInfo.processInfo.environment
        if let url = environment[variable], !url.isEmpty { return url }
        if environment["TALLY_REQUIRE_POSTGRES"] == "1" {
            let message = "TALLY_REQUIRE_POSTGRES=1 but \(variable) is not set: run the tests with scripts/test"
            Issue.record(Comment(rawValue: message), sourceLocation: sourceLocation)
            throw HarnessError("[postgres] " + message)
        }
        let message = "PostgreSQL case skipped: \(variable) is not set (scripts/test provisions one)"
        // A cancelled case of a parameterized test is reported as passed: the warning is what shows the skip.
        Issue.record(Comment(rawValue: message), severity: .warning, sourceLocation: sourceLocation)
        try Test.cancel(Comment(rawValue: message), sourceLocation: sourceLocation)
    }
}
