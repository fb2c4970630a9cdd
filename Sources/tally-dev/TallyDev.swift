import ArgumentParser
import Foundation

/// The `tally-dev` command: the workshop around a Tally server, kept out of the server's binary (`tally`). The local
/// App Store and model (`dev-appstore`, `dev-llm`), the demo, the benchmarks, the load test and the tests' probes.
/// Those that need a server start `tally serve` as a child process: the `tally` binary beside this one (see
/// ``ServerBinary``).
@main
struct TallyDev: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tally-dev",
        abstract: """
            Tally's workshop: local stand-ins for the App Store and an LLM provider, the demo, benchmarks, the load \
            test. The server itself is `tally`.
            """,
        subcommands: [
            DevLLM.self, DevAppStoreCommand.self, Demo.self, LoadTest.self, SDKBenchmark.self, EventsBenchmark.self, AIBenchmark.self,
            PurchasesBenchmark.self, AppAttestBenchmark.self, SessionProbe.self, SyncProbe.self, BareProxy.self,
        ])
}

/// The `tally` binary whose `serve` the load test and the benchmarks start: `--binary` when given, else `TALLY_BIN`,
/// else `tally` in this executable's directory (where `swift build` puts both products).
enum ServerBinary {
    static func path(_ given: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> String {
        if let given, !given.isEmpty { return given }
        if let path = environment["TALLY_BIN"], !path.isEmpty { return path }
        let own = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? Bundle.main.executablePath ?? CommandLine.arguments[0]
        let path = URL(fileURLWithPath: own).deletingLastPathComponent().appendingPathComponent("tally").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw ValidationError(
                "no tally binary at \(path): build it beside tally-dev (swift build --product tally), or set TALLY_BIN (or --binary)")
        }
        return path
    }
}
