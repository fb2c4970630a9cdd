import ArgumentParser

/// The `tally` command: serve, migrate and administer a Tally server. The workshop (the local stand-ins, the demo,
/// the benchmarks, the load test) is `tally-dev`, a binary of its own, so that none of it is linked into this one.
@main
struct Tally: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tally",
        abstract: """
            Tally: metering backend for mobile apps (guest identity, token wallets, daily quotas). The local stand-ins, \
            the demo, the benchmarks and the load test are in `tally-dev`.
            """,
        subcommands: [Serve.self, Migrate.self, Admin.self])
}
