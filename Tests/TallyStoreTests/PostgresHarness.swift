import Foundation
import TallyStore

/// Opens the PostgreSQL store named by `TALLY_TEST_DATABASE_URL`, runs it, migrates, and runs `body` with it.
/// All PostgreSQL tests share that one database, so every test creates its own accounts.
func withPostgresStore(_ body: (any TallyStorage) async throws -> Void) async throws {
    guard let url = ProcessInfo.processInfo.environment["TALLY_TEST_DATABASE_URL"], !url.isEmpty else {
        throw HarnessError(
            "[postgres] TALLY_REQUIRE_POSTGRES=1 but TALLY_TEST_DATABASE_URL is not set: "
                + "the PostgreSQL conformance tests cannot run")
    }
    _ = url
    throw HarnessError("[postgres] PostgresStore is not available yet")
}
