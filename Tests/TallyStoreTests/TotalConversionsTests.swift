import Foundation
import Testing

/// No number from outside can stop the server (issue 43, finding 1: `Int64(Double)` trapped on a cursor's instant): a
/// grep of the server's modules and of the wire types finds every unlabelled integer initializer (`Int(_:)`,
/// `Int64(_:)`, `UInt32(_:)`, …) whose argument is floating-point — a `Double`, `Float` or `TimeInterval` by a literal,
/// a call (`.rounded`, `floor`), or a name the file (or, for a member, any file) declares with such a type — and
/// requires none: a conversion of a floating-point number is `init(exactly:)` (it refuses: `nil`) or
/// `init(saturating:rounding:)` (TallyStore's, clamped), both total. Integer-to-integer conversions and parses of text
/// (`Int("12")`, optional) are not what it looks for; a site it cannot tell from one is listed in ``audited`` with why.
@Suite("Every conversion of a floating-point number is total", .timeLimit(.minutes(1)))
struct TotalConversionsTests {
    /// The repository root.
    private static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The modules that take numbers from outside: the server, its stores, Apple's payloads, and the wire types.
    static let folders = [
        "Sources/TallyServer", "Sources/TallyStore", "Sources/TallySQLite", "Sources/TallyPostgres", "Sources/TallyAppStore",
        "Sources/TallyAppleID", "Client/Sources/TallyAPI",
    ]

    /// Sites the heuristic flags whose argument is not floating-point, as `file: Type(argument)` (whitespace collapsed).
    static let audited: Set<String> = []

    /// One flagged conversion.
    struct Site: Hashable, CustomStringConvertible {
        var file: String
        var line: Int
        var text: String
        var key: String { "\(file): \(text)" }
        var description: String { "\(file):\(line): \(text)" }
    }

    /// A floating-point type as a declaration writes it (not `Double(` as a call).
    private static let floatingType = #"(?:Double|Float|CGFloat|TimeInterval|Float80)\b(?!\s*\()"#
    /// Marks of a floating-point expression: a type's name, rounding, the math functions, a literal with a fraction
    /// or an exponent.
    nonisolated(unsafe) private static let floatingMark = try! Regex(
        #"\b(?:Double|Float|CGFloat|TimeInterval)\b|\.rounded\b|\b(?:ceil|floor|log2?|log10|pow|sqrt|exp)\("#
            + #"|\b\d[\d_]*\.\d|\b\d[\d_]*[eE][+-]?\d"#
    ).wordBoundaryKind(.simple)
    /// An unlabelled integer initializer (its type the first group, not after a name or a dot): the argument follows
    /// the parenthesis.
    nonisolated(unsafe) private static let conversion = try! Regex(
        #"(?:^|[^\w.])(U?Int(?:8|16|32|64)?)\((?!\s*(?:exactly|clamping|truncatingIfNeeded|bitPattern|littleEndian|bigEndian|saturating|String|decoding)\b)"#
    ).wordBoundaryKind(.simple)
    /// Declarations with a floating-point type: `let x: Double`, `(x: TimeInterval`, `var x: Double {`, `func f(…) -> Double`.
    nonisolated(unsafe) private static let declarations = [
        try! Regex(#"\b(?:let|var)\s+(\w+)\s*:\s*"# + floatingType).wordBoundaryKind(.simple),
        try! Regex(#"[(,]\s*(?:\w+\s+)?(\w+)\s*:\s*"# + floatingType).wordBoundaryKind(.simple),
        try! Regex(#"\bfunc\s+(\w+)[^{\n]*->\s*"# + floatingType).wordBoundaryKind(.simple),
    ]
    /// `let x = <expression>` on one line: `x` is floating-point when the expression is marked so.
    nonisolated(unsafe) private static let inferred = try! Regex(#"\b(?:let|var)\s+(\w+)\s*=\s*([^\n]*)"#).wordBoundaryKind(.simple)

    /// Every flagged site in `folders`.
    static func flaggedSites() throws -> [Site] {
        var texts: [(file: String, text: String)] = []
        for folder in folders {
            let url = root.appendingPathComponent(folder)
            let files = try #require(FileManager.default.enumerator(at: url, includingPropertiesForKeys: nil))
            for case let file as URL in files where file.pathExtension == "swift" {
                texts.append((String(file.path.dropFirst(root.path.count + 1)), try String(contentsOf: file, encoding: .utf8)))
            }
        }
        // Names declared floating-point: in their file (a local or parameter), and anywhere (a member, read as `.name`).
        var members: Set<String> = ["timeIntervalSince1970", "timeIntervalSinceReferenceDate", "timeIntervalSinceNow"]
        var locals: [String: Set<String>] = [:]
        for (file, text) in texts {
            for pattern in declarations {
                for match in text.matches(of: pattern) {
                    guard let name = match.output[1].substring.map(String.init) else { continue }
                    locals[file, default: []].insert(name)
                    members.insert(name)
                }
            }
            for match in text.matches(of: inferred) {
                guard let name = match.output[1].substring, let expression = match.output[2].substring else { continue }
                if expression.contains(floatingMark) { locals[file, default: []].insert(String(name)) }
            }
        }
        var sites: [Site] = []
        for (file, text) in texts {
            for match in text.matches(of: conversion) {
                guard let type = match.output[1].substring else { continue }
                let argument = Self.argument(in: text, from: match.range.upperBound)
                guard isFloating(argument, locals: locals[file] ?? [], members: members) else { continue }
                let line = text[..<type.startIndex].filter { $0 == "\n" }.count + 1
                let call = String(type) + "(" + argument.split(whereSeparator: { $0.isWhitespace }).joined(separator: " ") + ")"
                sites.append(Site(file: file, line: line, text: String(call)))
            }
        }
        return sites.sorted { ($0.file, $0.line) < ($1.file, $1.line) }
    }

    /// The text up to the parenthesis that closes the one before `start`.
    private static func argument(in text: String, from start: String.Index) -> String {
        var depth = 1
        var index = start
        while index < text.endIndex {
            switch text[index] {
            case "(": depth += 1
            case ")":
                depth -= 1
                if depth == 0 { return String(text[start..<index]) }
            default: break
            }
            index = text.index(after: index)
        }
        return String(text[start...])
    }

    /// Whether `argument` reads as floating-point: marked so, or naming a floating-point local of its file, or
    /// member (a name after a dot), as the last part of a chain (`a.b.seconds` is the chain's last name's type).
    private static func isFloating(_ argument: String, locals: Set<String>, members: Set<String>) -> Bool {
        if argument.contains(floatingMark) { return true }
        for match in argument.matches(of: #/(\.)?\b([A-Za-z_]\w*)\b(?!\s*[.(\[])/#.wordBoundaryKind(.simple)) {
            let name = String(match.output.2)
            if match.output.1 != nil ? members.contains(name) : locals.contains(name) { return true }
        }
        return false
    }

    @Test("The grep sees the sources: every folder holds Swift files, and it finds what it is for")
    func grepWorks() throws {
        for folder in Self.folders {
            let files = try #require(FileManager.default.enumerator(at: Self.root.appendingPathComponent(folder), includingPropertiesForKeys: nil))
            #expect(files.contains { ($0 as? URL)?.pathExtension == "swift" }, "\(folder)")
        }
        // What it must flag, in the forms the server wrote before (the sites of issue 43) …
        let flagged = [
            "Int64((timeIntervalSince1970 * 1000).rounded(.down))", "Int(retryAfter.rounded(.up))", "Int64(window * 1000)",
            "Int(now.timeIntervalSince1970 / Self.slot)", "Int(1e3)", "UInt32(Double(count) * 0.5)",
        ]
        for text in flagged {
            #expect(Self.isFloating(String(text.drop { $0 != "(" }.dropFirst().dropLast()), locals: ["window", "retryAfter"], members: ["slot"]), "\(text)")
        }
        // … and what it must not.
        for argument in ["value", "count + 1", "row.value.used", "text.utf8.count", "self.seconds.count", "try row[\"n\"] as Int64"] {
            #expect(!Self.isFloating(argument, locals: ["window"], members: ["value", "seconds"]), "\(argument)")
        }
    }

    @Test("No unlabelled integer initializer of a floating-point number in the server's modules or the wire types")
    func everyConversionIsTotal() throws {
        let sites = try Self.flaggedSites()
        let unaudited = sites.filter { !Self.audited.contains($0.key) }
        #expect(
            unaudited.isEmpty,
            "Convert with `Int64(exactly:)` (and refuse) or `Int64(saturating:rounding:)` (TallyStore), or list the site in `audited` with why it is not floating-point:\n\(unaudited.map(\.description).joined(separator: "\n"))")
        let stale = Self.audited.subtracting(sites.map(\.key))
        #expect(stale.isEmpty, "audited sites no longer found: \(stale.sorted())")
    }
}
