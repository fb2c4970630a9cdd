import Foundation
import TallyClient

/// The samples of the sync doc comments and README's sync lines, verbatim, compiled (``SamplesAreCompiledTests``
/// checks they match).
enum SyncDocSamples {
    /// `SyncClient.now()`.
    static func syncNow(tally: Client) async throws {
        try await tally.sync.now()   // everything written so far is on the server
    }
}
