import ArgumentParser
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The options and the measuring of the one-core micro-benchmarks (`bench-purchases verify`, `bench-appattest
/// verify`): COUNT distinct objects verified one after the other, RUNS times, each one timed; the median of the runs
/// and the process's CPU time per second of them (about 1.0: one core) reported. Its arithmetic (seconds, medians) and
/// its output (one JSON line) serve the other benchmarks too.
struct BenchmarkRuns: ParsableArguments {
    @Option(help: "Distinct objects verified in each run.") var count = 2_000
    @Option(help: "Runs; the median is reported.") var runs = 5

    func validate() throws {
        guard count > 0, runs > 0 else { throw ValidationError("--count and --runs must be positive") }
    }

    /// Calls `run` with each run's number (1 to RUNS); answers the CPU seconds this process used per wall second of them.
    func measure(_ run: (Int) async throws -> Void) async rethrows -> Double {
        let cpuBefore = Self.cpuSeconds()
        let wallBefore = ContinuousClock.now
        for number in 1...runs { try await run(number) }
        return (Self.cpuSeconds() - cpuBefore) / Self.seconds(.now - wallBefore)
    }

    /// `verify` of each of `items` in turn, each one's µs appended to `samples`; answers items per second and what
    /// `verify` answered for each.
    static func timeEach<Item, Value>(
        _ items: [Item], samples: inout [Double], _ verify: (Item) async throws -> Value
    ) async rethrows -> (perSecond: Double, values: [Value]) {
        var values: [Value] = []
        values.reserveCapacity(items.count)
        let started = ContinuousClock.now
        for item in items {
            let one = ContinuousClock.now
            values.append(try await verify(item))
            samples.append(seconds(.now - one) * 1e6)
        }
        return (Double(items.count) / seconds(.now - started), values)
    }

    /// `duration` in seconds.
    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// The median of `values` (the upper one of an even count).
    static func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

    /// CPU seconds this process has used (all its threads): `clock()`, whose CLOCKS_PER_SEC is 10⁶ on Linux and Darwin.
    static func cpuSeconds() -> Double { Double(clock()) / 1e6 }

    /// `value` as one JSON line (sorted keys) on standard output: what every benchmark prints.
    static func printJSON(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        print(String(decoding: try encoder.encode(value), as: UTF8.self))
    }
}
