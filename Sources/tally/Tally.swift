import ArgumentParser

/// The `tally` command: serve, migrate and administer a Tally server; demonstrate, benchmark and load-test it.
@main
struct Tally: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tally",
        abstract: "Tally: metering backend for mobile apps (guest identity, token wallets, daily quotas).",
        subcommands: [Serve.self, Migrate.self, Admin.self, Demo.self, SDKBenchmark.self, EventsBenchmark.self, LoadTest.self, SessionProbe.self, SyncProbe.self, DevLLM.self, DevAppStoreCommand.self, AIBenchmark.self, PurchasesBenchmark.self, AppAttestBenchmark.self])
}
