import Foundation
import Testing

/// Every Swift sample a developer reads — in README.md, the guides in docs/ and the SDK's doc comments — is compiled: its
/// lines appear, in order, in a file of this folder that the test target builds (``ReadmeSamples``,
/// ``DocCommentSamples``), or, for the server's samples, in the server test that runs them
/// (`Tests/TallyServerTests/EmbeddingTests.swift`). A sample edited in the docs but not here, or here but
/// not in the docs, fails.
/// The app manifest sample (a block starting `// Package.swift`) is built for real by `scripts/app-package`.
@Suite("Docs samples compile", .timeLimit(.minutes(1)))
struct SamplesAreCompiledTests {
    static let samplesDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()

    /// A sample's lines without indentation and blank lines: the docs indent by context, the code by scope.
    static func normalized(_ text: some StringProtocol) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
    }

    /// The ```swift blocks of a Markdown text.
    static func markdownBlocks(_ text: String) -> [String] {
        var blocks: [String] = []
        var current: [Substring]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if current == nil, trimmed == "```swift" {
                current = []
            } else if current != nil, trimmed == "```" {
                blocks.append(current!.joined(separator: "\n"))
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    /// The ```swift blocks inside `///` comments of the SDK's sources, with the file each comes from.
    static func docCommentBlocks() throws -> [(file: String, block: String)] {
        try SDKSources.files().flatMap { file in
            let comments = file.text.split(separator: "\n")
                .map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { $0.hasPrefix("///") }
                .map { String($0.dropFirst(3).drop(while: { $0 == " " })) }
            return markdownBlocks(comments.joined(separator: "\n")).map { (URL(fileURLWithPath: file.path).lastPathComponent, $0) }
        }
    }

    /// The server test that compiles and runs README's embedding sample.
    static let serverSamples = SDKSources.root.appendingPathComponent("Tests/TallyServerTests/EmbeddingTests.swift")

    /// The normalized lines of every compiled samples file here, and of the server's.
    static func compiledLines() throws -> [String] {
        let files = try FileManager.default.contentsOfDirectory(at: samplesDirectory, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "swift" && $0.lastPathComponent != "SamplesAreCompiledTests.swift" }
        return try (files + [serverSamples]).flatMap { normalized(try String(contentsOf: $0, encoding: .utf8)) }
    }

    /// Whether `block` occurs as consecutive lines of `lines`.
    static func contains(_ lines: [String], _ block: [String]) -> Bool {
        guard !block.isEmpty, block.count <= lines.count else { return block.isEmpty }
        return (0...(lines.count - block.count)).contains { start in Array(lines[start..<(start + block.count)]) == block }
    }

    /// README.md and the guides in docs/.
    static func guides() throws -> [URL] {
        let docs = SDKSources.root.appendingPathComponent("docs")
        let guides = try FileManager.default.contentsOfDirectory(at: docs, includingPropertiesForKeys: nil).filter { $0.pathExtension == "md" }
        return [SDKSources.root.appendingPathComponent("README.md")] + guides.sorted { $0.path < $1.path }
    }

    @Test func readmeAndGuideSamplesAreCompiled() throws {
        var count = 0
        let compiled = try Self.compiledLines()
        for file in try Self.guides() {
            let text = try String(contentsOf: file, encoding: .utf8)
            let blocks = Self.markdownBlocks(text).filter { !$0.trimmingCharacters(in: .whitespacesAndNewlines).hasPrefix("// Package.swift") }
            count += blocks.count
            for block in blocks {
                let found = Self.contains(compiled, Self.normalized(block))
                #expect(found, "\(file.lastPathComponent) sample not compiled in Tests/TallyClientTests/Samples or \(Self.serverSamples.lastPathComponent):\n\(block)")
            }
        }
        #expect(count > 10, "README.md and docs/ have Swift samples: \(count) found")
    }

    @Test func docCommentSamplesAreCompiled() throws {
        let blocks = try Self.docCommentBlocks()
        try #require(!blocks.isEmpty)
        let compiled = try Self.compiledLines()
        for (file, block) in blocks {
            let found = Self.contains(compiled, Self.normalized(block))
            #expect(found, "doc sample in \(file) not compiled in Tests/TallyClientTests/Samples:\n\(block)")
        }
    }
}
