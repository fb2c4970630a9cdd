import Foundation
import Testing

/// The ledger is written in one place per store (ARCHITECTURE.md, "balance = Σ entry amounts"): a grep of the
/// stores' sources finds each ledger, wallet and idempotency-key write once, where the table says it is, so a
/// new command composes that place instead of writing its own copy.
@Suite("The ledger is written in one place", .timeLimit(.minutes(1)))
struct LedgerOnePlaceTests {
    /// `Sources/` of this package.
    private static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources")

    /// One occurrence of a pattern: the file (relative to its store's folder) and the text matched.
    private struct Found: Hashable, CustomStringConvertible {
        var file: String
        var text: String
        var description: String { "\(file): \(text)" }
    }

    /// Every match of `pattern` (case-insensitive, any run of white space between words) in the Swift files of
    /// `store`'s folder, with the whitespace of the match collapsed.
    private static func find(_ pattern: String, in store: String) throws -> [Found] {
        let folder = sources.appendingPathComponent(store)
        let regex = try Regex(pattern).ignoresCase()
        let files = try #require(FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil))
        var found: [Found] = []
        for case let url as URL in files where url.pathExtension == "swift" {
            let text = try String(contentsOf: url, encoding: .utf8)
            let file = String(url.path.dropFirst(folder.path.count + 1))
            for match in text.matches(of: regex) {
                let words = text[match.range].split(whereSeparator: \.isWhitespace).joined(separator: " ").lowercased()
                found.append(Found(file: file, text: words))
            }
        }
        return found.sorted { ($0.file, $0.text) < ($1.file, $1.text) }
    }

    @Test("The sources are where the test looks: both stores' folders hold Swift files that write to the ledger")
    func foldersAreFound() throws {
        for store in ["TallyPostgres", "TallySQLite"] {
            #expect(try !Self.find(#"ledger_entries"#, in: store).isEmpty, "\(Self.sources.path)/\(store)")
        }
    }

    @Test("PostgreSQL: entries, wallet moves and idempotency records are written only by PostgresLedger.swift's fragments")
    func postgres() throws {
        #expect(try Self.find(#"insert\s+into\s+ledger_entries"#, in: "TallyPostgres")
            == [Found(file: "PostgresLedger.swift", text: "insert into ledger_entries")])
        #expect(try Self.find(#"insert\s+into\s+idempotency_keys"#, in: "TallyPostgres")
            == [Found(file: "PostgresLedger.swift", text: "insert into idempotency_keys")])
        // Every other update of a wallet row only rewrites it unchanged (a write to what a plan reads moves its stamp).
        let moves = try Self.find(#"update\s+wallets\s+(\w+\s+)?set\s+\w+(\.\w+)?\s*=\s*[\w.]+"#, in: "TallyPostgres")
        #expect(moves.filter { $0.file == "PostgresLedger.swift" }
            == [Found(file: "PostgresLedger.swift", text: "update wallets w set balance = s.balance")])
        #expect(moves.filter { $0.file != "PostgresLedger.swift" }.allSatisfy { $0.text.hasSuffix("set version = version") }, "\(moves)")
        #expect(try Self.find(#"insert\s+into\s+wallets\s*\([^)]*\)\s*select\s+\w+\s*,\s*[^0\s]"#, in: "TallyPostgres").isEmpty,
            "a wallet is created empty; its first tokens are a ledger entry")
    }

    @Test("SQLite: entries and wallet moves only in SQLiteStore.append, idempotency records only in SQLiteStore.idempotent (declared in SQLiteWrites.swift)")
    func sqlite() throws {
        // Each statement is declared once (SQLiteWrites.swift), and each declaration is run from its one place.
        #expect(try Self.find(#"insert\s+into\s+ledger_entries"#, in: "TallySQLite")
            == [Found(file: "SQLiteWrites.swift", text: "insert into ledger_entries")])
        #expect(try Self.find(#"update\s+wallets\s+set"#, in: "TallySQLite")
            == [Found(file: "SQLiteWrites.swift", text: "update wallets set")])
        #expect(try Self.find(#"insert\s+into\s+idempotency_keys"#, in: "TallySQLite")
            == [Found(file: "SQLiteWrites.swift", text: "insert into idempotency_keys")])
        #expect(try Self.find(#"SQLiteWrites\.(appendEntry|moveWallet)\b"#, in: "TallySQLite")
            == [Found(file: "SQLiteStore.swift", text: "sqlitewrites.appendentry"), Found(file: "SQLiteStore.swift", text: "sqlitewrites.movewallet")])
        #expect(try Self.find(#"SQLiteWrites\.rememberResponse\b"#, in: "TallySQLite")
            == [Found(file: "SQLiteStore+Commands.swift", text: "sqlitewrites.rememberresponse")])
        #expect(try Self.find(#"insert\s+into\s+wallets\s*\([^)]*\)\s*values\s*\(\s*\?\s*,\s*[^0\s]"#, in: "TallySQLite").isEmpty,
            "a wallet is created empty; its first tokens are a ledger entry")
    }
}
