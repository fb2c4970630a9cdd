import Foundation
import Testing

/// Rules both stores follow are decided once, in TallyStore, and each store calls that one place (the way
/// `LedgerOnePlaceTests` keeps the ledger's writes in one place per store): a grep of each store's sources finds the
/// call to the shared type and none of the store's own copies of the rule. The stores' folders are searched whole,
/// so SQL moved between files (into declaration files) stays covered.
@Suite("Shared rules are decided in one place", .timeLimit(.minutes(1)))
struct SharedRulesOnePlaceTests {
    /// `Sources/` of this package.
    private static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources")
    private static let stores = ["TallySQLite", "TallyPostgres"]

    /// Every match of `pattern` (case-sensitive) in the Swift files of `store`'s folder, as `file: text`.
    private static func find(_ pattern: String, in store: String, file only: String? = nil) throws -> [String] {
        let folder = sources.appendingPathComponent(store)
        let regex = try Regex(pattern)
        let files = try #require(FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil))
        var found: [String] = []
        for case let url as URL in files where url.pathExtension == "swift" {
            if let only, url.lastPathComponent != only { continue }
            let text = try String(contentsOf: url, encoding: .utf8)
            for match in text.matches(of: regex) { found.append("\(url.lastPathComponent): \(text[match.range])") }
        }
        return found
    }

    @Test("The sources are where the test looks")
    func foldersAreFound() throws {
        for store in Self.stores { #expect(try !Self.find("refresh_tokens", in: store).isEmpty, "\(Self.sources.path)/\(store)") }
    }

    @Test("Refresh-token rotation: both stores decide through RefreshTokenPolicy, neither on a token's fields itself")
    func refreshTokens() throws {
        for store in Self.stores {
            #expect(try !Self.find(#"RefreshTokenPolicy\.decide\("#, in: store).isEmpty, "\(store)")
            let ownRules = try Self.find(
                #"(usedAt|revokedAt|"used_at"\]|"revoked_at"\]|"expires_at"\]) *(as Int64\??\))? *(!=|==) *nil|(expiresAt|"expires_at"\] as Int64\)) *(<=|>|<|>=) *now"#,
                in: store)
            #expect(ownRules.isEmpty, "\(store) decides on a refresh token by itself: \(ownRules)")
        }
    }

    @Test("The session cap: both stores take SessionCap's count and order; neither computes limit - 1 or its own order")
    func sessionCap() throws {
        for store in Self.stores {
            #expect(try !Self.find(#"SessionCap\.othersKept\(limit:"#, in: store).isEmpty, "\(store)")
            #expect(try !Self.find(#"SessionCap\.newestFirst"#, in: store).isEmpty, "\(store)")
            let own = try Self.find(#"limit *- *1|max\(limit, *1\)|max\(session\.limit|rowid DESC|s\.created_at DESC"#, in: store)
            #expect(own.isEmpty, "\(store) has its own session cap: \(own)")
        }
    }

    @Test("Range pages: both stores write DocumentRangeBounds' predicate; neither reads a query's raw bounds or cursor")
    func rangeBounds() throws {
        for store in Self.stores {
            #expect(try !Self.find(#"query\.bounds\b"#, in: store).isEmpty, "\(store)")
            let raw = try Self.find(#"query\.(from|to|after)\b"#, in: store)
            #expect(raw.isEmpty, "\(store) builds range bounds itself: \(raw)")
        }
    }

    @Test("Document writers: both take mutations through DocumentTaking and PushTaking, and a charge's refusal through TakenMutation")
    func documentWriters() throws {
        for (store, writer) in [("TallySQLite", "DocumentWriter.swift"), ("TallyPostgres", "PostgresDocumentWriter.swift")] {
            for call in [#"DocumentTaking\(version:"#, #"taking\.plan\("#, #"taking\.take\("#, #"taking\.needsCount\("#, #"TakenMutation\.chargeFailed\("#] {
                #expect(try !Self.find(call, in: store, file: writer).isEmpty, "\(writer) does not call \(call)")
            }
            #expect(try !Self.find(#"PushTaking\(after:"#, in: store).isEmpty, "\(store)")
            #expect(try Self.find(#"refusesPayment|DocumentPlanner\.plan\("#, in: store).isEmpty, "\(store) plans documents itself")
        }
        // Why the rest differs is written where both writers point.
        let taking = try String(contentsOf: Self.sources.appendingPathComponent("TallyStore/DocumentTaking.swift"), encoding: .utf8)
        #expect(taking.contains("What the writers do not share, and why"))
    }

    @Test("balance_after and held_after: WalletState.applying decides them; neither store adds amounts to a wallet in SQL")
    func balanceAfter() throws {
        for store in Self.stores {
            #expect(try !Self.find(#"\.applying\("#, in: store).isEmpty, "\(store)")
            let inSQL = try Self.find(#"(balance|held) *= *(\w+\.)?(balance|held) *[-+]|balance_after *[-+]|(balance|held) *\+ *\?"#, in: store)
            #expect(inSQL.isEmpty, "\(store) computes a wallet's move in SQL: \(inSQL)")
        }
    }
}
