import ArgumentParser
import Dispatch
import Foundation
import TallyAPI
import TallyAppStore
import TallyDevAppStore

/// `tally-dev bench-purchases`: what `scripts/bench` needs to measure `POST /v1/purchases/apple` — a certificate authority
/// the server trusts, StoreKit 2 transactions signed under it for the benchmark users — and a one-core micro-benchmark of
/// the verification every purchase costs.
struct PurchasesBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-purchases",
        abstract: "Sign App Store transactions for scripts/bench, and time their verification on one core.",
        subcommands: [CA.self, Sign.self, Verify.self])

    /// The app the benchmark's transactions are for; the server's `appStore:` section must say the same.
    static let bundleId = "com.example.bench"
    /// The consumable they buy (the server's configuration gives it its tokens).
    static let productId = "bench.tokens100"

    static func note(_ line: String) { FileHandle.standardError.write(Data("[bench-purchases] \(line)\n".utf8)) }

    /// A consumable transaction `id` of ``productId`` for the account `appAccountToken`, signed now with `chain` as
    /// StoreKit 2 signs it (the stand-in's own signing, ``DevJWS``; one signature, where ``DevAppStore`` also signs
    /// the notification twice over).
    static func signedTransaction(id: String, appAccountToken: UUID, chain: DevCertificateAuthority.SigningChain) throws -> String {
        let now = Date()
        let transaction = JWSTransactionDecodedPayload(
            transactionId: id, originalTransactionId: id, bundleId: bundleId, productId: productId, purchaseDate: now,
            originalPurchaseDate: now, type: .consumable, appAccountToken: appAccountToken, signedDate: now,
            environment: AppStoreEnvironment.sandbox.rawValue, transactionReason: .purchase, storefront: "USA", storefrontId: "143441",
            price: 990, currency: "USD")
        return try DevJWS.sign(transaction, chain: chain)
    }

    /// `tally-dev bench-purchases ca --certs DIR`: the stand-in App Store's CA in DIR (made unless there), before the server
    /// starts: it must trust DIR/root.der.
    struct CA: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create (or keep) the certificate authority in --certs; prints the root's path for appStore.rootCertificates.")

        @Option(help: "Directory of the certificate authority.") var certs: String

        func run() throws {
            let directory = URL(fileURLWithPath: certs, isDirectory: true).standardizedFileURL
            _ = try DevCertificateAuthority.loadOrGenerate(directory: directory, now: Date())
            print(directory.appendingPathComponent(DevCertificateAuthority.File.root).path)
        }
    }

    /// `tally-dev bench-purchases sign`: COUNT distinct consumable transactions, the i-th bought by the (i mod USERS)-th
    /// user (its appAccountToken), each written as one line `userId<TAB>transactionId<TAB>accessToken<TAB>JWS`.
    struct Sign: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Sign distinct consumable transactions for the benchmark users (one TSV line each: userId, transactionId, access token, JWS).")

        @Option(help: "Directory of the certificate authority (see `ca`).") var certs: String
        @Option(help: "The users' ids, one a line (their appAccountTokens).") var ids: String
        @Option(help: "The users' access tokens, one a line, in the order of --ids.") var tokens: String
        @Option(help: "How many transactions.") var count: Int
        @Option(help: "Where to write them.") var out: String

        func validate() throws {
            guard count > 0 else { throw ValidationError("--count must be positive") }
        }

        func run() async throws {
            let ids = try Self.lines(ids), tokens = try Self.lines(tokens)
            guard !ids.isEmpty, ids.count == tokens.count else {
                throw ValidationError("--ids and --tokens must hold the same (non-zero) number of lines")
            }
            let accounts = try ids.map { id in
                guard let uuid = UUID(uuidString: id) else { throw ValidationError("\(id) is not a user id (a UUID)") }
                return uuid
            }
            let directory = URL(fileURLWithPath: certs, isDirectory: true).standardizedFileURL
            let authority = try DevCertificateAuthority.loadOrGenerate(directory: directory, now: Date())
            let started = ContinuousClock.now
            // Spread over the cores; the i-th transaction's id is first + i, so no two meet.
            let parts = max(1, min(ProcessInfo.processInfo.activeProcessorCount, count / 100))
            let first = UInt64.random(in: 2_000_000_000_000_000...2_000_900_000_000_000)
            let chunks = try await withThrowingTaskGroup(of: (Int, [String]).self) { group in
                for part in 0..<parts {
                    group.addTask {
                        let chain = try authority.chain()
                        var lines: [String] = []
                        for index in stride(from: part, to: count, by: parts) {
                            let user = index % accounts.count
                            let id = String(first + UInt64(index))
                            let jws = try PurchasesBenchmark.signedTransaction(id: id, appAccountToken: accounts[user], chain: chain)
                            lines.append("\(ids[user])\t\(id)\t\(tokens[user])\t\(jws)\n")
                        }
                        return (part, lines)
                    }
                }
                var chunks = [[String]](repeating: [], count: parts)
                for try await (part, lines) in group { chunks[part] = lines }
                return chunks
            }
            // Interleaved back into index order, so that the i-th line is the i-th user's (mod USERS).
            var text = ""
            for index in 0..<count { text += chunks[index % parts][index / parts] }
            try Data(text.utf8).write(to: URL(fileURLWithPath: out))
            let seconds = BenchmarkRuns.seconds(ContinuousClock.now - started)
            PurchasesBenchmark.note(
                "signed \(count) transactions for \(ids.count) users in \(String(format: "%.1f", seconds)) s "
                    + "(\(text.utf8.count / count) bytes a line)")
        }

        static func lines(_ path: String) throws -> [String] {
            try String(contentsOfFile: path, encoding: .utf8).split(whereSeparator: \.isNewline)
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
    }

    /// `tally-dev bench-purchases verify`: ``AppStoreVerifier/verifyTransaction(_:)`` of COUNT distinct transactions one
    /// after the other (one verification in flight: one core), RUNS times, each run on a new verifier (whose cache has
    /// none of them); then the same bytes again on that verifier (a replay, answered from its cache). Prints one JSON line.
    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Time AppStoreVerifier.verifyTransaction on one core: distinct signed transactions verified one at a time.",
            discussion: """
                Prints one JSON line: verifications per second of each run and their median, the median and 99th \
                percentile of one verification (µs), the same bytes verified again (replays, answered from the \
                verifier's cache) per second, and the CPU time the process used per second of the runs (about 1.0: \
                one core).
                """)

        @OptionGroup var options: BenchmarkRuns

        struct Result: Codable {
            var count: Int
            var runs: [Double]
            var verificationsPerSecond: Double
            var p50Micros: Double
            var p99Micros: Double
            var replayVerificationsPerSecond: Double
            var cpuPerWallSecond: Double
            var jwsBytes: Int
        }

        func run() async throws {
            let (count, runs) = (options.count, options.runs)
            let authority = try DevCertificateAuthority.generate(now: Date())
            let chain = try authority.chain()
            let signed = try (0..<(count + 200)).map { index in
                try PurchasesBenchmark.signedTransaction(id: String(2_000_000_000_000_000 + index), appAccountToken: UUID(), chain: chain)
            }
            let (warmUp, measured) = (signed.prefix(200), Array(signed.dropFirst(200)))
            var rates: [Double] = [], replays: [Double] = [], samples: [Double] = [], ignored: [Double] = []
            samples.reserveCapacity(count * runs)
            let cpu = try await options.measure { run in
                let verifier = try AppStoreVerifier(
                    rootCertificates: [authority.rootDER], bundleId: PurchasesBenchmark.bundleId, environments: [.sandbox])
                for jws in warmUp { _ = try await verifier.verifyTransaction(jws) }
                rates.append(try await BenchmarkRuns.timeEach(measured, samples: &samples) { _ = try await verifier.verifyTransaction($0) }.perSecond)
                replays.append(try await BenchmarkRuns.timeEach(measured, samples: &ignored) { _ = try await verifier.verifyTransaction($0) }.perSecond)
                PurchasesBenchmark.note("run \(run)/\(runs): \(Int(rates[run - 1])) verifications/s; the same again: \(Int(replays[run - 1]))/s")
            }
            let (p50, p99) = SDKBenchmark.percentiles(&samples)
            try BenchmarkRuns.printJSON(
                Result(
                    count: count, runs: rates, verificationsPerSecond: BenchmarkRuns.median(rates), p50Micros: p50, p99Micros: p99,
                    replayVerificationsPerSecond: BenchmarkRuns.median(replays), cpuPerWallSecond: cpu, jwsBytes: measured[0].utf8.count))
        }
    }
}
