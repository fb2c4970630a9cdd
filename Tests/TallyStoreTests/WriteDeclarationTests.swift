import Foundation
import TallyStore
import Testing

/// Every write statement of a store lies in a declaration (``StoreWrite``) that names exactly the tables it changes:
/// what the caches forget is derived from the declarations, so an undeclared write, or a table missing from a
/// declaration, would leave a cache answering with what a commit replaced.
@Suite("Every store write is declared with the tables it changes", .timeLimit(.minutes(1)))
struct WriteDeclarationTests {
    @Test("SQLite: every INSERT/UPDATE/DELETE lies in a StoreWrite naming exactly the tables it writes")
    func sqlite() throws {
        let problems = try WriteDeclarationScanner.check(storeFolder: "TallySQLite")
        #expect(problems.isEmpty, "\(problems.count) problem(s):\n\(problems.map(\.description).joined(separator: "\n"))")
    }

    @Test("PostgreSQL: every INSERT/UPDATE/DELETE lies in a StoreWrite naming exactly the tables it writes")
    func postgres() throws {
        let problems = try WriteDeclarationScanner.check(storeFolder: "TallyPostgres")
        #expect(problems.isEmpty, "\(problems.count) problem(s):\n\(problems.map(\.description).joined(separator: "\n"))")
    }

    @Test("The scanner finds the declarations and the schema's cascades where the stores keep them")
    func scannerSeesTheStores() throws {
        let declarations = try WriteDeclarationScanner.declarations(storeFolder: "TallySQLite")
        #expect(declarations.count > 50, "\(declarations.count) declarations found")
        let cascades = try WriteDeclarationScanner.schemaCascades(storeFolder: "TallySQLite")
        #expect(cascades.tablesChanged(deleting: "sessions") == ["sessions", "refresh_tokens"])
        let users = cascades.tablesChanged(deleting: "users")
        #expect(users.isSuperset(of: ["users", "wallets", "holds", "sessions", "refresh_tokens", "documents", "purchases"]))
        #expect(!users.contains("device_credentials"), "dropped by a later migration")
    }

    @Test("The scanner catches an undeclared write and a declaration with the wrong tables")
    func scannerCatchesBadCases() {
        let schema = """
            CREATE TABLE users (id TEXT PRIMARY KEY);
            CREATE TABLE sessions (id TEXT PRIMARY KEY, user_id TEXT REFERENCES users(id) ON DELETE CASCADE);
            CREATE TABLE refresh_tokens (hash TEXT, session_id TEXT REFERENCES sessions(id) ON DELETE CASCADE);
            CREATE TABLE purchases (id TEXT, user_id TEXT REFERENCES users(id) ON DELETE SET NULL);
            """
        let good = """
            enum Writes {
                static let move = StoreWrite(.wallets, sql: "UPDATE wallets SET balance = ? WHERE user_id = ?")
                // A comment is no write: UPDATE wallets SET balance = 0
                static let gone = StoreWrite(
                    .users, .sessions, .refreshTokens, .purchases, sql: "DELETE FROM users WHERE id = ?")
                static func some(_ n: Int) -> StoreWrite {
                    StoreWrite(.holds, sql: "WITH h AS (UPDATE holds SET status = 'x' WHERE id IN (\\(n)) RETURNING id) SELECT 1")
                }
            }
            """
        #expect(WriteDeclarationScanner.check(sources: [("Good.swift", good)], schema: schema).isEmpty)

        let undeclared = """
            func revoke(_ db: Database) throws {
                try db.run(sql: \"\"\"
                    update  sessions
                    set revoked_at = ? WHERE id = ?
                    \"\"\")
            }
            """
        let found = WriteDeclarationScanner.check(sources: [("Undeclared.swift", undeclared)], schema: schema)
        #expect(found.count == 1)
        #expect(found.first?.description.contains("Undeclared.swift:3") == true, "\(found)")
        #expect(found.first?.description.contains("not inside a StoreWrite") == true, "\(found)")

        let wrongTables = """
            static let move = StoreWrite(
                .wallets,
                sql: \"\"\"
                    WITH moved AS (UPDATE wallets SET balance = 1 RETURNING user_id)
                    INSERT INTO ledger_entries (user_id) SELECT user_id FROM moved
                    \"\"\")
            static let revoke = StoreWrite(.sessions, sql: "DELETE FROM sessions WHERE id = ?")
            static let extra = StoreWrite(.users, .wallets, sql: "UPDATE users SET email = ?")
            static let unknown = StoreWrite(.nonsense, .leases, sql: "DELETE FROM leases")
            """
        let wrong = WriteDeclarationScanner.check(sources: [("Wrong.swift", wrongTables)], schema: schema)
        #expect(wrong.count == 4, "\(wrong)")
        #expect(wrong.contains { $0.description.contains("Wrong.swift:1") && $0.description.contains("missing ledger_entries") }, "\(wrong)")
        #expect(wrong.contains { $0.description.contains("Wrong.swift:7") && $0.description.contains("missing refresh_tokens") }, "\(wrong)")
        #expect(wrong.contains { $0.description.contains("Wrong.swift:8") && $0.description.contains("extra wallets") }, "\(wrong)")
        #expect(wrong.contains { $0.description.contains("Wrong.swift:9") && $0.description.contains("nonsense") }, "\(wrong)")
    }
}

/// Reads a store's Swift sources and checks its writes against their declarations: every `INSERT INTO t`,
/// `UPDATE t … SET` and `DELETE FROM t` (any case, also inside CTEs) must lie inside a `StoreWrite(` call, and the
/// tables the call declares (the `.case` names of ``StoreTable`` before `sql:`) must be exactly those its SQL
/// writes: the statements' targets, and for a `DELETE` the tables its rows reach through the schema's
/// `ON DELETE CASCADE` (transitively) and `ON DELETE SET NULL`. `//` comments are ignored, and so are the migrations
/// (`Schema*.swift`, `PostgresSchema*.swift`), which the cascades are read from.
struct WriteDeclarationScanner {
    /// One finding, with the file and line it is at.
    struct Problem: CustomStringConvertible, Sendable {
        /// The file, relative to its store's folder.
        var file: String
        /// The line of the statement or of the declaration.
        var line: Int
        /// What is wrong.
        var message: String
        /// `file:line: message`.
        var description: String { "\(file):\(line): \(message)" }
    }

    /// One `StoreWrite(` call: where it is, the table names it declares, and the tables its SQL writes.
    struct Declaration: Sendable {
        /// The file, relative to its store's folder.
        var file: String
        /// The line of `StoreWrite(`.
        var line: Int
        /// The declared `StoreTable` case names, as written.
        var declaredCases: [String]
        /// The statements' target tables (without cascades).
        var targets: Set<String>
        /// The targets of its `DELETE`s.
        var deleted: Set<String>
    }

    /// The tables with a foreign key acting on a deleted parent row, from the migrations.
    struct Cascades: Sendable {
        /// parent → (child, whether the child's rows are deleted too (`CASCADE`) or only updated (`SET NULL`)).
        var edges: [String: [(child: String, deletes: Bool)]] = [:]

        /// `table` and every table a `DELETE` of its rows changes through the foreign keys.
        func tablesChanged(deleting table: String) -> Set<String> {
            var changed: Set<String> = [table]
            var deleting = [table]
            var seen: Set<String> = [table]
            while let parent = deleting.popLast() {
                for (child, deletes) in edges[parent] ?? [] {
                    changed.insert(child)
                    if deletes, seen.insert(child).inserted { deleting.append(child) }
                }
            }
            return changed
        }
    }

    /// `Sources/` of this package.
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources")

    /// `StoreTable` case name → table name.
    static let tableOfCase: [String: String] = Dictionary(
        uniqueKeysWithValues: StoreTable.allCases.map { (String(describing: $0), $0.rawValue) })

    // MARK: Reading a store

    /// The problems of the store in `Sources/<storeFolder>`.
    static func check(storeFolder: String) throws -> [Problem] {
        let (code, schema) = try read(storeFolder: storeFolder)
        return check(sources: code, schema: schema)
    }

    /// Every declaration of the store in `Sources/<storeFolder>`.
    static func declarations(storeFolder: String) throws -> [Declaration] {
        try read(storeFolder: storeFolder).code.flatMap { declarations(in: stripComments($0.text), file: $0.file) }
    }

    /// The cascades of the store's migrations.
    static func schemaCascades(storeFolder: String) throws -> Cascades {
        cascades(schema: try read(storeFolder: storeFolder).schema)
    }

    /// The store's Swift files (path relative to its folder, text), split into code and migrations.
    private static func read(storeFolder: String) throws -> (code: [(file: String, text: String)], schema: String) {
        let folder = sources.appendingPathComponent(storeFolder)
        let files = try #require(FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil))
        var code: [(file: String, text: String)] = []
        var schema: [(file: String, text: String)] = []
        for case let url as URL in files where url.pathExtension == "swift" {
            let file = String(url.path.dropFirst(folder.path.count + 1))
            let text = try String(contentsOf: url, encoding: .utf8)
            let name = url.lastPathComponent
            if name.hasPrefix("Schema") || name.hasPrefix("PostgresSchema") {
                schema.append((file, text))
            } else {
                code.append((file, text))
            }
        }
        #expect(!code.isEmpty && !schema.isEmpty, "\(folder.path): no sources or no migrations found")
        return (code.sorted { $0.file < $1.file }, schema.sorted { $0.file < $1.file }.map { stripComments($0.text) }.joined(separator: "\n"))
    }

    // MARK: Checking

    /// The problems of `sources` (file name, Swift text) against the cascades of `schema` (migration SQL).
    static func check(sources: [(file: String, text: String)], schema: String) -> [Problem] {
        let cascades = cascades(schema: schema)
        var problems: [Problem] = []
        for (file, original) in sources {
            let text = stripComments(original)
            let extents = storeWriteExtents(in: text)
            for statement in statements(in: text)
            where !extents.contains(where: { $0.lowerBound <= statement.range.lowerBound && statement.range.upperBound <= $0.upperBound }) {
                problems.append(Problem(
                    file: file, line: line(of: statement.range.lowerBound, in: text),
                    message: "`\(statement.text)` is not inside a StoreWrite(…) declaration"))
            }
            for declaration in declarations(in: text, file: file) {
                var declared = Set<String>()
                for name in declaration.declaredCases {
                    if let table = tableOfCase[name] {
                        declared.insert(table)
                    } else {
                        problems.append(Problem(file: file, line: declaration.line, message: "declares .\(name), which StoreTable does not name"))
                    }
                }
                var written = declaration.targets
                for table in declaration.deleted { written.formUnion(cascades.tablesChanged(deleting: table)) }
                for table in written where tableOfCase.values.contains(table) == false {
                    problems.append(Problem(file: file, line: declaration.line, message: "writes \(table), which StoreTable does not name"))
                }
                written = written.filter { tableOfCase.values.contains($0) }
                let missing = written.subtracting(declared).sorted()
                let extra = declared.subtracting(written).sorted()
                if !missing.isEmpty || !extra.isEmpty {
                    var message = "declares [\(declared.sorted().joined(separator: ", "))], its SQL writes [\(written.sorted().joined(separator: ", "))]:"
                    if !missing.isEmpty { message += " missing \(missing.joined(separator: ", "))" }
                    if !extra.isEmpty { message += (missing.isEmpty ? "" : ";") + " extra \(extra.joined(separator: ", "))" }
                    problems.append(Problem(file: file, line: declaration.line, message: message))
                }
            }
        }
        return problems
    }

    /// The `StoreWrite(` calls of `text` (comments stripped).
    static func declarations(in text: String, file: String) -> [Declaration] {
        storeWriteExtents(in: text).map { extent in
            let call = String(text[extent])
            let head = call.range(of: "sql:").map { call[..<$0.lowerBound] } ?? call[...]
            let cases = head.matches(of: #/\.(\w+)/#).map { String($0.output.1) }
            let found = statements(in: call)
            return Declaration(
                file: file, line: line(of: extent.lowerBound, in: text), declaredCases: cases,
                targets: Set(found.map(\.table)), deleted: Set(found.filter(\.deletes).map(\.table)))
        }
    }

    /// One write statement found in source text: the words matched, its target, and whether it deletes.
    struct Statement {
        /// Where the words matched are.
        var range: Range<String.Index>
        /// The words matched, white space collapsed.
        var text: String
        /// The target table, lowercased.
        var table: String
        /// Whether it is a `DELETE`.
        var deletes: Bool
    }

    /// Every `INSERT INTO t`, `UPDATE t [alias] SET`, `DELETE FROM t` of `text` (case-insensitive).
    static func statements(in text: String) -> [Statement] {
        let insert = #/(?i)\b(?:INSERT|REPLACE)\s+(?:OR\s+\w+\s+)?INTO\s+(?:\w+\.)?(\w+)/#
        let update = #/(?i)\bUPDATE\s+(?:ONLY\s+)?(?:\w+\.)?(\w+)(?:\s+(?:AS\s+)?\w+)?\s+SET\b/#
        let delete = #/(?i)\bDELETE\s+FROM\s+(?:ONLY\s+)?(?:\w+\.)?(\w+)/#
        var found: [Statement] = []
        for match in text.matches(of: insert) {
            found.append(Statement(range: match.range, text: collapse(match.output.0), table: match.output.1.lowercased(), deletes: false))
        }
        for match in text.matches(of: update) where match.output.1.lowercased() != "set" {
            found.append(Statement(range: match.range, text: collapse(match.output.0), table: match.output.1.lowercased(), deletes: false))
        }
        for match in text.matches(of: delete) {
            found.append(Statement(range: match.range, text: collapse(match.output.0), table: match.output.1.lowercased(), deletes: true))
        }
        return found.sorted { $0.range.lowerBound < $1.range.lowerBound }
    }

    /// The extent of each `StoreWrite(` call, from its name to its closing parenthesis (parentheses matched; the
    /// SQL in it has balanced ones).
    static func storeWriteExtents(in text: String) -> [Range<String.Index>] {
        text.matches(of: #/(?:^|[^\w.])StoreWrite\(/#).map { match in
            let start = text.index(match.range.upperBound, offsetBy: -"StoreWrite(".count)
            var depth = 0
            var index = text.index(before: match.range.upperBound)
            while index < text.endIndex {
                switch text[index] {
                case "(": depth += 1
                case ")": depth -= 1
                default: break
                }
                if depth == 0 { return start..<text.index(after: index) }
                index = text.index(after: index)
            }
            return start..<text.endIndex
        }
    }

    /// The cascades of `schema` (every migration's SQL, in order). A table's foreign keys are those of its last
    /// `CREATE TABLE` (a rebuilt table is created as `next_<name>`, then renamed) and of the `ALTER TABLE … ADD COLUMN`s
    /// after it; a table dropped and never renamed to or created again has none.
    static func cascades(schema: String) -> Cascades {
        let event = #/(?i)\bALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(\w+)\s+RENAME\s+TO\s+(\w+)|\bDROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?(\w+)|\b(CREATE\s+(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?|ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?)(?:\w+\.)?(\w+)|\bREFERENCES\s+(?:\w+\.)?(\w+)\s*(?:\([^)]*\))?\s*ON\s+DELETE\s+(CASCADE|SET\s+NULL|SET\s+DEFAULT)/#
        func normalized(_ name: Substring) -> String {
            let name = name.lowercased()
            return name.hasPrefix("next_") ? String(name.dropFirst(5)) : name
        }
        /// Per table: the sequence number of its last CREATE, and its references by the definition they belong to.
        var lastCreate: [String: Int] = [:]
        var references: [(table: String, definition: Int, creates: Bool, parent: String, deletes: Bool)] = []
        var dropped: [String: Int] = [:]
        var createdAgain: [String: Int] = [:]
        var renamedTo: Set<String> = []
        var current: (table: String, definition: Int, creates: Bool)?
        for (sequence, match) in schema.matches(of: event).enumerated() {
            if let to = match.output.2 {
                renamedTo.insert(to.lowercased())
                current = nil
            } else if let table = match.output.3 {
                dropped[table.lowercased()] = sequence
                current = nil
            } else if let verb = match.output.4, let table = match.output.5 {
                let creates = verb.uppercased().hasPrefix("CREATE")
                current = (normalized(table), sequence, creates)
                if creates {
                    lastCreate[normalized(table)] = sequence
                    createdAgain[table.lowercased()] = sequence
                }
            } else if let parent = match.output.6, let action = match.output.7, let current {
                references.append((current.table, current.definition, current.creates, normalized(parent), action.uppercased() == "CASCADE"))
            }
        }
        func isDropped(_ table: String) -> Bool {
            guard let drop = dropped[table] else { return false }
            return !renamedTo.contains(table) && (createdAgain[table] ?? -1) < drop
        }
        var cascades = Cascades()
        for reference in references where !isDropped(reference.table) && !isDropped(reference.parent) {
            let last = lastCreate[reference.table] ?? -1
            guard reference.creates ? reference.definition == last : reference.definition > last else { continue }
            cascades.edges[reference.parent, default: []].append((reference.table, reference.deletes))
        }
        return cascades
    }

    // MARK: Text

    /// `text` with each `//` comment removed (a `//` at a line's start or after white space: not `https://`), the
    /// lines kept.
    static func stripComments(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> Substring in
            guard let comment = line.firstMatch(of: #/(?:^|\s)\/\//#) else { return line }
            return line[..<comment.range.lowerBound]
        }.joined(separator: "\n")
    }

    private static func line(of index: String.Index, in text: String) -> Int {
        text[..<index].reduce(1) { $1 == "\n" ? $0 + 1 : $0 }
    }

    private static func collapse(_ text: Substring) -> String {
        text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }
}
