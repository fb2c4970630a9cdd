import Foundation
import TallyClient

/// The samples of the SDK's doc comments, verbatim, compiled (``SamplesAreCompiledTests`` checks they match).
enum DocCommentSamples {
    /// `Client.ledgerPages(pageSize:)`.
    static func ledgerPages(tally: Client) async throws -> [LedgerEntry] {
        var entries: [LedgerEntry] = []
        for try await page in tally.ledgerPages(pageSize: 20) {
            entries += page
            if entries.count >= 60 { break }   // stop when the screen is full; no further request is made
        }
        return entries
    }

    static func showPaywall(available: Int64?) {}

    /// `ClientError`: a refusal's code and the wallet it carries.
    static func paywall(tally: Client) async throws {
        do {
            try await tally.perform("ai.query")
        } catch let error as ClientError where error.code == .insufficientTokens {
            showPaywall(available: error.wallet?.available)
        }
    }

    /// `Client.signOut(discardingPendingWrites:)`: unsynced changes make it refuse.
    static func signOut(tally: Client) async throws {
        do {
            try await tally.signOut()
        } catch let error as ClientError where error.code == .pendingWrites {
            // "2 changes are not saved yet": sync first (try await tally.sync.now()), or drop them:
            try await tally.signOut(discardingPendingWrites: true)
        }
    }
}

#if canImport(Security)
extension DocCommentSamples {
    /// `KeychainSecureStore`: the store an app shares with its extensions.
    static func sharedStore(apiURL: URL) throws -> Client {
        let store = try KeychainSecureStore(appGroup: "group.com.example.astro")
        let tally = Client(configuration: ClientConfiguration(baseURL: apiURL, secureStore: store))
        return tally
    }
}
#endif
