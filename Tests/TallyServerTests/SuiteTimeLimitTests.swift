import Foundation
import Testing

/// A suite without a time limit can hang the whole CI run when one event is lost (issue 48). This lint reads
/// every Swift file under `Tests/`, `Client/Tests/` and `Examples/*/Tests/` (as ``DeploymentTargetTests`` reads the SDK's sources)
/// and fails, naming file:line, on a `@Suite` whose attribute's arguments have no `.timeLimit(…)`, and on a
/// `@Test` with none of its own outside every `@Suite` type (top level, or in a type without `@Suite`, which
/// swift-testing runs as an implicit suite with no traits). A suite's limit covers its tests and nested types,
/// and extensions of it in other files.
@Suite("Every suite has a time limit", .timeLimit(.minutes(1)))
struct SuiteTimeLimitTests {
    /// The package's root: this file is `Tests/TallyServerTests/SuiteTimeLimitTests.swift`.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Every `.swift` file under `Tests/` and each example's `Tests/`, by path from the root, with its text.
    static func testSources() throws -> [(path: String, text: String)] {
        let examples = root.appendingPathComponent("Examples")
        let exampleTests = (try? FileManager.default.contentsOfDirectory(atPath: examples.path)) ?? []
        let folders = [root.appendingPathComponent("Tests"), root.appendingPathComponent("Client/Tests")]
            + exampleTests.sorted().map { examples.appendingPathComponent($0).appendingPathComponent("Tests") }
        var files: [(path: String, text: String)] = []
        for folder in folders where FileManager.default.fileExists(atPath: folder.path) {
            let urls = try #require(FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil, options: [.skipsHiddenFiles]))
            for case let url as URL in urls where url.pathExtension == "swift" {
                let path = String(url.standardizedFileURL.path.dropFirst(root.standardizedFileURL.path.count + 1))
                files.append((path, try String(contentsOf: url, encoding: .utf8)))
            }
        }
        return files.sorted { $0.path < $1.path }
    }

    @Test("Every @Suite in Tests/ and Examples/*/Tests/ has a .timeLimit, and no @Test runs outside one without its own")
    func everySuiteHasATimeLimit() throws {
        let files = try Self.testSources()
        let suites = files.reduce(0) { $0 + SuiteTimeLimitScanner.declarations(in: $1.text).suites.count }
        #expect(suites > 200, "found \(suites) suites in \(files.count) files under \(Self.root.path)")
        #expect(files.contains { $0.path.hasPrefix("Examples/") }, "the examples' tests are read too")
        #expect(files.contains { $0.path.hasPrefix("Client/Tests/") }, "the SDK package's own tests are read too")
        let offences = SuiteTimeLimitScanner.offences(in: files)
        #expect(
            offences.isEmpty,
            "add .timeLimit(.minutes(N)) (whole minutes) to:\n\(offences.map(\.description).joined(separator: "\n"))")
    }

    @Test("A suite without the trait is reported at its attribute's line, bare, named or with other traits; one with it is not")
    func reportsASuiteWithoutATimeLimit() {
        let text = """
            import Testing

            @Suite struct Bare {
                @Test func a() {}
            }

            @Suite("Named, mentioning .timeLimit only in its name") struct Named {}

            @Suite(
                "Several lines",
                .serialized
            )
            struct SeveralLines {}

            @Suite(
                "Limited over several lines",
                .serialized,
                .timeLimit(.minutes(2))
            )
            struct LimitedOverSeveralLines {
                @Test func b() {}
            }

            @Suite(.timeLimit(.minutes(1))) struct Limited {}
            """
        let offences = SuiteTimeLimitScanner.offences(in: [(path: "Tests/Scratch.swift", text: text)])
        #expect(offences.map(\.line) == [3, 7, 9], "\(offences)")
        #expect(offences.first?.description == "Tests/Scratch.swift:3: @Suite Bare without .timeLimit")
        #expect(offences.allSatisfy { $0.what.hasPrefix("@Suite") })
    }

    @Test("The repository's own files fail the lint once a time limit is taken out of one of them")
    func reportsARealSuiteOnceItsLimitIsRemoved() throws {
        let files = try Self.testSources()
        let index = try #require(files.firstIndex { $0.path == "Tests/TallyServerTests/SuiteTimeLimitTests.swift" })
        var scratch = files
        scratch[index].text = scratch[index].text.replacingOccurrences(
            of: "@Suite(\"Every suite has a time limit\", .timeLimit(.minutes(1)))", with: "@Suite(\"Every suite has a time limit\")")
        #expect(scratch[index].text != files[index].text)
        let line = try #require(files[index].text.split(separator: "\n", omittingEmptySubsequences: false)
            .firstIndex { $0.hasPrefix("@Suite(\"Every suite has a time limit\"") }) + 1
        let offences = SuiteTimeLimitScanner.offences(in: scratch)
        #expect(offences.map(\.description) == ["Tests/TallyServerTests/SuiteTimeLimitTests.swift:\(line): @Suite SuiteTimeLimitTests without .timeLimit"])
    }

    @Test("A @Test outside every suite is reported unless it has its own limit; nested types and extensions of a suite are covered")
    func reportsATestOutsideASuite() {
        let suite = """
            @Suite("Outer", .timeLimit(.minutes(3)))
            struct Outer {
                struct Inner {
                    @Test func nested() {}
                }
            }
            """
        let text = """
            import Testing

            @Test func topLevel() {}

            @Test(.timeLimit(.minutes(1))) func topLevelLimited() {}

            struct Implicit {
                class func helper() {}
                @Test("in a type without @Suite") func implicit() {}
            }

            extension Outer {
                @Test func inAnExtension() {}
            }

            extension Outer.Inner {
                @Test func inAnExtensionOfANestedType() {}
            }

            extension Unrelated {
                @Test func inAnExtensionOfAnotherType() {}
            }
            """
        let offences = SuiteTimeLimitScanner.offences(in: [(path: "A.swift", text: suite), (path: "B.swift", text: text)])
        #expect(offences.map(\.description) == [
            "B.swift:3: @Test outside any suite, without .timeLimit",
            "B.swift:9: @Test in Implicit, which is not a @Suite, without .timeLimit",
            "B.swift:21: @Test in Unrelated, which is not a @Suite, without .timeLimit",
        ])
    }

    @Test("Attributes in comments, strings, raw strings, interpolations and regex literals are not read; lines still count")
    func ignoresLiteralsAndComments() {
        let text = ##"""
            // @Suite struct InAComment {}
            /* @Suite struct InABlock { /* nested */ @Test func x() {} } */
            let a = "@Suite struct InAString {}"
            let b = """
                @Suite struct InAMultilineString {}
                \("@Test func inAnInterpolation() {}")
                """
            let c = #"@Suite("raw") struct InARawString { \#("@Test func x() {}") }"#
            let d = #/@Suite\(\)/#
            let actor = 1
            @Suite struct Real {}
            """##
        let declarations = SuiteTimeLimitScanner.declarations(in: text)
        #expect(declarations.suites.map(\.line) == [11] && declarations.suites.first?.typeName == "Real", "\(declarations.suites)")
        #expect(declarations.tests.isEmpty, "\(declarations.tests.map(\.line))")
    }
}

/// The lint's reading of Swift source: every `@Suite` attribute and whether its arguments name a
/// `.timeLimit`, and every `@Test` that is neither limited itself nor inside a `@Suite` type (or an extension
/// of one), which swift-testing would run with no limit at all.
enum SuiteTimeLimitScanner {
    /// A suite or test that can run for ever: where it is and what it is.
    struct Offence: Equatable, CustomStringConvertible {
        var file: String
        var line: Int
        var what: String
        var description: String { "\(file):\(line): \(what)" }
    }

    /// What one file declares: its `@Suite` attributes, and its `@Test`s with the types that enclose them.
    struct Declarations {
        struct Suite { var line: Int; var limited: Bool; var typeName: String? }
        struct Enclosing { var name: String; var isSuite: Bool; var isExtension: Bool }
        struct TestFunction { var line: Int; var limited: Bool; var enclosing: [Enclosing] }
        var suites: [Suite] = []
        var tests: [TestFunction] = []
    }

    /// Offences in `files` (path and text). A test is limited by its own `.timeLimit`, or by being inside a
    /// `@Suite` type, nested or in an extension of one, in any of the files (suites' traits apply to what they hold).
    static func offences(in files: [(path: String, text: String)]) -> [Offence] {
        let declared = files.map { (path: $0.path, declarations: declarations(in: $0.text)) }
        let suiteTypes = Set(declared.flatMap { $0.declarations.suites.compactMap(\.typeName) })
        var offences: [Offence] = []
        for (path, declarations) in declared {
            for suite in declarations.suites where !suite.limited {
                offences.append(Offence(file: path, line: suite.line, what: "@Suite \(suite.typeName ?? "") without .timeLimit"))
            }
            for test in declarations.tests where !test.limited {
                let inSuite = test.enclosing.contains { type in
                    type.isSuite || (type.isExtension && type.name.split(separator: ".").contains { suiteTypes.contains(String($0)) })
                }
                if inSuite { continue }
                let place = test.enclosing.last.map { "in \($0.name), which is not a @Suite" } ?? "outside any suite"
                offences.append(Offence(file: path, line: test.line, what: "@Test \(place), without .timeLimit"))
            }
        }
        return offences
    }

    /// The suites and tests `text` declares.
    static func declarations(in text: String) -> Declarations {
        let code = blanked(Array(text.utf8))
        var result = Declarations()
        /// A `{` … `}` block: a type's body (named, and whether it is a `@Suite`) or any other.
        var blocks: [Declarations.Enclosing?] = []
        /// A `@Suite` attribute waiting for its type's name (its index in `result.suites`).
        var pendingSuite: Int?
        /// A type declaration whose body's `{` comes next.
        var pendingType: Declarations.Enclosing?
        var line = 1
        var i = 0
        var previous: UInt8 = 0x20 // the last byte that is not white space
        while i < code.count {
            let byte = code[i]
            if byte == UInt8(ascii: "\n") { line += 1; i += 1; continue }
            if isSpace(byte) { i += 1; continue }
            // After this byte's token, `previous` is its last byte (`.` before a member name such as `.class`).
            defer { previous = code[i - 1] }
            if byte == UInt8(ascii: "@"), i + 1 < code.count, isIdentifierStart(code[i + 1]) {
                let (name, end) = identifier(code, from: i + 1)
                i = end
                guard name == "Suite" || name == "Test" else { continue }
                let attributeLine = line
                var arguments: ArraySlice<UInt8> = []
                var j = i
                while j < code.count, isSpace(code[j]) { j += 1 }
                if j < code.count, code[j] == UInt8(ascii: "(") {
                    let close = matchingParenthesis(code, from: j)
                    arguments = code[j ..< close]
                    line += arguments.count { $0 == UInt8(ascii: "\n") }
                    i = min(close + 1, code.count)
                }
                let limited = contains(arguments, ".timeLimit")
                if name == "Suite" {
                    result.suites.append(.init(line: attributeLine, limited: limited, typeName: nil))
                    pendingSuite = result.suites.count - 1
                } else {
                    result.tests.append(.init(line: attributeLine, limited: limited, enclosing: blocks.compactMap { $0 }))
                }
                continue
            }
            if isIdentifierStart(byte) {
                let (word, end) = identifier(code, from: i)
                let isMember = previous == UInt8(ascii: ".")
                i = end
                guard !isMember else { continue }
                switch word {
                case "struct", "class", "enum", "actor", "extension", "protocol":
                    var j = end
                    while j < code.count, isSpace(code[j]) { j += 1 }
                    guard j < code.count, isIdentifierStart(code[j]) else { continue }
                    var (name, nameEnd) = identifier(code, from: j)
                    // `class func`, `class var`, …: a member, not a type.
                    if ["func", "var", "let", "subscript", "init", "override", "final", "static", "private", "fileprivate",
                        "internal", "public", "open", "nonisolated", "required", "convenience"].contains(name) { continue }
                    while nameEnd + 1 < code.count, code[nameEnd] == UInt8(ascii: "."), isIdentifierStart(code[nameEnd + 1]) {
                        let (component, componentEnd) = identifier(code, from: nameEnd + 1)
                        name += "." + component
                        nameEnd = componentEnd
                    }
                    let isSuite = word != "extension" && pendingSuite != nil
                    if isSuite, let index = pendingSuite { result.suites[index].typeName = name }
                    pendingSuite = nil
                    pendingType = .init(name: name, isSuite: isSuite, isExtension: word == "extension")
                    line += code[i ..< nameEnd].count { $0 == UInt8(ascii: "\n") }
                    i = nameEnd
                case "func", "var", "let", "init", "subscript", "typealias":
                    pendingSuite = nil
                    pendingType = nil
                default:
                    break
                }
                continue
            }
            if byte == UInt8(ascii: "{") {
                blocks.append(pendingType)
                pendingType = nil
            } else if byte == UInt8(ascii: "}") {
                _ = blocks.popLast()
            }
            i += 1
        }
        return result
    }

    /// `source` with comments and the insides of string and regex literals (with their interpolations) turned
    /// to spaces, line breaks kept: what is left is code, whose parentheses and braces balance.
    static func blanked(_ source: [UInt8]) -> [UInt8] {
        var out = source
        var i = 0
        _ = code(source, &out, &i, untilParenthesis: false)
        return out
    }

    /// Reads code from `i` (blanking literals and comments in `out`) to the end, or, `untilParenthesis`, to just
    /// after the `)` that closes an interpolation.
    private static func code(_ s: [UInt8], _ out: inout [UInt8], _ i: inout Int, untilParenthesis: Bool) -> Bool {
        var depth = 0
        while i < s.count {
            let c = s[i]
            if c == UInt8(ascii: "/"), i + 1 < s.count, s[i + 1] == UInt8(ascii: "/") {
                while i < s.count, s[i] != UInt8(ascii: "\n") { blank(&out, i); i += 1 }
            } else if c == UInt8(ascii: "/"), i + 1 < s.count, s[i + 1] == UInt8(ascii: "*") {
                var nesting = 0
                repeat {
                    if s[i] == UInt8(ascii: "/"), i + 1 < s.count, s[i + 1] == UInt8(ascii: "*") {
                        nesting += 1; blank(&out, i); blank(&out, i + 1); i += 2
                    } else if s[i] == UInt8(ascii: "*"), i + 1 < s.count, s[i + 1] == UInt8(ascii: "/") {
                        nesting -= 1; blank(&out, i); blank(&out, i + 1); i += 2
                    } else {
                        blank(&out, i); i += 1
                    }
                } while nesting > 0 && i < s.count
            } else if c == UInt8(ascii: "#") || c == UInt8(ascii: "\"") {
                var hashes = 0
                while i + hashes < s.count, s[i + hashes] == UInt8(ascii: "#") { hashes += 1 }
                let opener = i + hashes
                if opener < s.count, s[opener] == UInt8(ascii: "\"") {
                    literal(s, &out, &i, hashes: hashes)
                } else if hashes > 0, opener < s.count, s[opener] == UInt8(ascii: "/") {
                    regex(s, &out, &i, hashes: hashes)
                } else {
                    i += max(hashes, 1)
                }
            } else {
                if untilParenthesis {
                    if c == UInt8(ascii: "(") { depth += 1 }
                    if c == UInt8(ascii: ")") {
                        if depth == 0 { blank(&out, i); i += 1; return true }
                        depth -= 1
                    }
                    blank(&out, i)
                }
                i += 1
            }
        }
        return false
    }

    /// A string literal from its first `#` or `"` at `i`, with `hashes` `#`s; leaves `i` just after it.
    private static func literal(_ s: [UInt8], _ out: inout [UInt8], _ i: inout Int, hashes: Int) {
        let quote = UInt8(ascii: "\"")
        var j = i + hashes
        let multiline = j + 2 < s.count && s[j + 1] == quote && s[j + 2] == quote
        j += multiline ? 3 : 1
        for k in i ..< j { blank(&out, k) }
        i = j
        func hashesFollow(_ at: Int) -> Bool {
            at + hashes <= s.count && s[at ..< at + hashes].allSatisfy { $0 == UInt8(ascii: "#") }
        }
        while i < s.count {
            let c = s[i]
            if c == UInt8(ascii: "\\"), hashesFollow(i + 1) {
                let after = i + 1 + hashes
                for k in i ..< min(after, s.count) { blank(&out, k) }
                i = after
                if i < s.count, s[i] == UInt8(ascii: "(") {
                    blank(&out, i); i += 1
                    _ = code(s, &out, &i, untilParenthesis: true)
                } else if i < s.count {
                    blank(&out, i); i += 1
                }
            } else if multiline, c == quote, i + 2 < s.count, s[i + 1] == quote, s[i + 2] == quote, hashesFollow(i + 3) {
                for k in i ..< i + 3 + hashes { blank(&out, k) }
                i += 3 + hashes
                return
            } else if !multiline, c == quote, hashesFollow(i + 1) {
                for k in i ..< i + 1 + hashes { blank(&out, k) }
                i += 1 + hashes
                return
            } else if !multiline, c == UInt8(ascii: "\n") {
                return // an unterminated literal ends with its line
            } else {
                blank(&out, i); i += 1
            }
        }
    }

    /// An extended regex literal (`#/…/#`) from its first `#` at `i`.
    private static func regex(_ s: [UInt8], _ out: inout [UInt8], _ i: inout Int, hashes: Int) {
        let start = i
        i += hashes + 1
        while i < s.count {
            if s[i] == UInt8(ascii: "\\") { i += 2; continue }
            if s[i] == UInt8(ascii: "/"), i + hashes < s.count, s[i + 1 ... i + hashes].allSatisfy({ $0 == UInt8(ascii: "#") }) {
                i += 1 + hashes
                break
            }
            i += 1
        }
        i = min(i, s.count)
        for k in start ..< i { blank(&out, k) }
    }

    private static func blank(_ out: inout [UInt8], _ at: Int) {
        if at < out.count, out[at] != UInt8(ascii: "\n") { out[at] = UInt8(ascii: " ") }
    }

    private static func isSpace(_ c: UInt8) -> Bool {
        c == UInt8(ascii: " ") || c == UInt8(ascii: "\t") || c == UInt8(ascii: "\r") || c == UInt8(ascii: "\n")
    }

    private static func isIdentifierStart(_ c: UInt8) -> Bool {
        c == UInt8(ascii: "_") || c == UInt8(ascii: "`") || (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z"))
            || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z")) || c >= 0x80
    }

    /// The identifier starting at `i` and the index after it (a back-quoted one keeps its quotes: never a keyword).
    private static func identifier(_ s: [UInt8], from i: Int) -> (String, Int) {
        var j = i
        if s[j] == UInt8(ascii: "`") {
            j += 1
            while j < s.count, s[j] != UInt8(ascii: "`"), s[j] != UInt8(ascii: "\n") { j += 1 }
            j = min(j + 1, s.count)
        } else {
            while j < s.count, isIdentifierStart(s[j]) || (s[j] >= UInt8(ascii: "0") && s[j] <= UInt8(ascii: "9")) { j += 1 }
        }
        return (String(decoding: s[i ..< j], as: UTF8.self), j)
    }

    /// The index of the `)` that closes the `(` at `open` (or the end).
    private static func matchingParenthesis(_ s: [UInt8], from open: Int) -> Int {
        var depth = 0
        for k in open ..< s.count {
            if s[k] == UInt8(ascii: "(") { depth += 1 }
            if s[k] == UInt8(ascii: ")") { depth -= 1; if depth == 0 { return k } }
        }
        return s.count
    }

    private static func contains(_ haystack: ArraySlice<UInt8>, _ needle: String) -> Bool {
        let n = Array(needle.utf8)
        guard haystack.count >= n.count else { return false }
        var k = haystack.startIndex
        while k + n.count <= haystack.endIndex {
            if haystack[k ..< k + n.count].elementsEqual(n) { return true }
            k += 1
        }
        return false
    }
}
