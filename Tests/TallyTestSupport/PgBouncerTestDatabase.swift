import Foundation
import Testing

/// The provisioned database through the PgBouncer that `scripts/with-pgbouncer` starts in front of it, in
/// `pool_mode=transaction` (`TALLY_TEST_PGBOUNCER_URL`), under the same rule as ``postgresURL(sourceLocation:)``:
/// without it the case is skipped, or fails under `TALLY_REQUIRE_POSTGRES=1`.
public func pgbouncerURL(sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
    try PostgresTestDatabase.url(of: "TALLY_TEST_PGBOUNCER_URL", sourceLocation: sourceLocation)
}

/// `url` (a database of the provisioned cluster, e.g. a ``ScratchDatabase``) through that PgBouncer: the same
/// user, password and database on PgBouncer's host and port (it serves every database under its own name).
public func throughPgBouncer(_ url: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
    guard var components = URLComponents(string: url), let bouncer = URLComponents(string: try pgbouncerURL(sourceLocation: sourceLocation))
    else { throw HarnessError("bad database URL") }
    components.host = bouncer.host
    components.port = bouncer.port
    guard let string = components.string else { throw HarnessError("bad database URL") }
    return string
}
