import Foundation
import TallyLoad
import TallyTestSupport
import Testing

/// `tally` is the server's binary (serve, migrate, admin) and `tally-dev` the workshop's (the local stand-ins, the
/// demo, the benchmarks, the load test, the tests' probes): each built binary lists exactly its own commands, and the
/// `tally` target in Package.swift depends on no dev module, so none is linked into what operators deploy.
@Suite("tally and tally-dev: the server's commands and the workshop's", .timeLimit(.minutes(10)))
struct CommandLineSplitTests {
    /// The package's root: this file is `Tests/TallyServerTests/CommandLineSplitTests.swift`.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// What `tally --help` lists: the server's commands, nothing else.
    static let serverCommands: Set = ["serve", "migrate", "admin"]
    /// What `tally-dev --help` lists.
    static let devCommands: Set = [
        "dev-llm", "dev-appstore", "demo", "loadtest", "bench-sdk", "bench-events", "bench-ai", "bench-purchases", "bench-appattest",
        "bare-proxy",
    ]
    /// Modules that exist for development, tests and measurement, never for serving.
    static let devModules = ["TallyDevAppStore", "TallyDevLLM", "TallyLoad"]

    @Test("tally --help lists exactly serve, migrate and admin, and says where the dev tools went")
    func serverHelp() async throws {
        let (status, output) = try await Self.run(TallyBinary.path, ["--help"])
        #expect(status == .exited(0), "\(output)")
        #expect(Self.subcommands(inHelp: output) == Self.serverCommands, "\(output)")
        #expect(output.contains("tally-dev"), "the abstract names tally-dev:\n\(output)")
    }

    @Test("tally-dev --help lists the stand-ins, the demo, the benchmarks and the load test, and no server command")
    func devHelp() async throws {
        let (status, output) = try await Self.run(TallyBinary.devPath, ["--help"])
        #expect(status == .exited(0), "\(output)")
        #expect(Self.subcommands(inHelp: output) == Self.devCommands, "\(output)")
    }

    /// `X --help` prints X's own usage when X is a command of the binary, and the binary's overview otherwise
    /// (hidden commands included), so nothing is started either way.
    @Test("The probes run under tally-dev only; no dev command runs under tally", arguments: ["sdk-session-probe", "sdk-sync-probe", "dev-llm", "loadtest"])
    func commandLivesInTallyDev(_ command: String) async throws {
        let (devStatus, devOutput) = try await Self.run(TallyBinary.devPath, [command, "--help"])
        #expect(devStatus == .exited(0), "tally-dev \(command) --help:\n\(devOutput)")
        #expect(devOutput.contains("USAGE: tally-dev \(command)"), "tally-dev \(command) --help:\n\(devOutput)")
        let (_, output) = try await Self.run(TallyBinary.path, [command, "--help"])
        #expect(!output.contains("USAGE: tally \(command)"), "tally has \(command):\n\(output)")
        #expect(output.contains("USAGE: tally <subcommand>"), "tally \(command) --help:\n\(output)")
    }

    @Test("Package.swift: the tally target depends on no dev module; tally-dev is a product")
    func manifest() throws {
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let block = try #require(Self.targetBlock(named: "tally", in: manifest), "no .executableTarget(name: \"tally\" in Package.swift")
        #expect(block.contains("\"TallyServer\""), "the block read is the tally target's:\n\(block)")
        for module in Self.devModules {
            #expect(!block.contains("\"\(module)\""), "the tally target depends on \(module):\n\(block)")
        }
        let dev = try #require(Self.targetBlock(named: "tally-dev", in: manifest), "no .executableTarget(name: \"tally-dev\" in Package.swift")
        #expect(dev.contains("\"TallyDevAppStore\"") && dev.contains("\"TallyDevLLM\"") && dev.contains("\"TallyLoad\""))
        #expect(manifest.contains(#".executable(name: "tally-dev", targets: ["tally-dev"])"#))
    }

    @Test("The built tally binary holds no symbol of a dev module")
    func binaryHasNoDevSymbols() throws {
        let binary = try Data(contentsOf: URL(fileURLWithPath: TallyBinary.path), options: .alwaysMapped)
        for module in Self.devModules {
            #expect(binary.range(of: Data(module.utf8)) == nil, "\(TallyBinary.path) contains \(module)")
        }
        let dev = try Data(contentsOf: URL(fileURLWithPath: TallyBinary.devPath), options: .alwaysMapped)
        #expect(dev.range(of: Data("TallyDevAppStore".utf8)) != nil, "the check would see a linked module")
    }

    // MARK: Helpers

    /// Runs `binary arguments…` to its end; how it ended and its standard output and error together.
    static func run(_ binary: String, _ arguments: [String]) async throws -> (ChildProcess.Termination, String) {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("tally-help-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: output) }
        var environment = ProcessInfo.processInfo.environment
        environment["COLUMNS"] = "200"  // one line a command, whatever the terminal
        let process = try ChildProcess(binary, arguments: arguments, environment: environment, standardOutput: .file(output), standardError: .file(output))
        let status = await withTaskCancellationHandler { await process.wait() } onCancel: { process.terminate() }
        return (status, (try? String(contentsOf: output, encoding: .utf8)) ?? "")
    }

    /// The command names ArgumentParser's help lists under `SUBCOMMANDS:` (a name indented by two spaces; a
    /// description wrapped onto a line of its own is indented further).
    static func subcommands(inHelp help: String) -> Set<String> {
        var names: Set<String> = []
        var inSection = false
        for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("SUBCOMMANDS:") { inSection = true; continue }
            guard inSection else { continue }
            if line.trimmingCharacters(in: .whitespaces).isEmpty { break }
            guard line.hasPrefix("  "), !line.hasPrefix("   "), let name = line.split(separator: " ").first else { continue }
            if name == "See" { continue }
            names.insert(String(name))
        }
        return names
    }

    /// The text of `.executableTarget(name: "<name>", …)` in `manifest`, from its opening parenthesis to the matching
    /// one, with `//` comments removed.
    static func targetBlock(named name: String, in manifest: String) -> String? {
        let lines = manifest.split(separator: "\n", omittingEmptySubsequences: false).map { line -> Substring in
            guard let comment = line.range(of: "//") else { return line }
            return line[..<comment.lowerBound]
        }
        let text = lines.joined(separator: "\n")
        var search = text.startIndex..<text.endIndex
        while let start = text.range(of: ".executableTarget(", range: search) {
            var index = start.upperBound
            var depth = 1
            while index < text.endIndex, depth > 0 {
                if text[index] == "(" { depth += 1 } else if text[index] == ")" { depth -= 1 }
                index = text.index(after: index)
            }
            let block = String(text[start.lowerBound..<index])
            let compact = block.filter { !$0.isWhitespace }
            if compact.hasPrefix(".executableTarget(name:\"\(name)\",") { return block }
            search = index..<text.endIndex
        }
        return nil
    }
}
