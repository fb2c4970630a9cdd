import ArgumentParser
import Crypto
import Foundation
import NIOHTTP1
import NIOPosix
import TallyAPI
import TallyAppAttest
import TallyDevAppStore
import TallyLoad

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `tally-dev bench-appattest`: what App Attest costs the server — one-core verification of attestations and assertions
/// (`verify`), and the CPU an assertion adds to a metered action through the whole server (`action`). The objects are
/// the local stand-in's (``DevAppAttest``: Apple's layout, its own App Attestation CA, which the verifier trusts).
struct AppAttestBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-appattest",
        abstract: "Time App Attest: attestations and assertions verified on one core, and the CPU an assertion adds to a metered action.",
        subcommands: [Verify.self, Action.self])

    /// The team of the app the benchmark's keys are attested for.
    static let teamId = "BENCH12345"
    /// The app's bundle id.
    static let bundleId = "com.example.bench"
    /// The metered action `action` performs (a daily quota, then 1 token).
    static let actionPath = "/v1/actions/bench.metered"

    static func note(_ line: String) { FileHandle.standardError.write(Data("[bench-appattest] \(line)\n".utf8)) }

    static func sha256(_ bytes: [UInt8]) -> [UInt8] { Array(SHA256.hash(data: bytes)) }

    /// The `X-Tally-Assertion` value a device sends on `POST actionPath` with the idempotency key `nonce` and no body:
    /// a new assertion by `keyId` (its counter one more than the last) over ``AssertionHeader/clientData(method:path:nonce:bodySHA256:)``.
    static func assertionHeader(_ standIn: DevAppAttest, keyId: String, nonce: String) throws -> String {
        let clientData = AssertionHeader.clientData(method: "POST", path: actionPath, nonce: nonce, bodySHA256: emptyBodySHA256)
        let object = try standIn.generateAssertion(keyId, clientDataHash: sha256(clientData))
        return AssertionHeader(keyId: keyId, assertion: Data(object).base64EncodedString()).value
    }

    /// SHA-256 of no bytes, in lowercase hex: the body hash of a request without a body.
    static let emptyBodySHA256 = SHA256.hash(data: [UInt8]()).map { String(format: "%02x", $0) }.joined()

    /// `tally-dev bench-appattest verify`: ``AppAttestVerifier/verifyAttestation(_:keyId:challenge:at:)`` of COUNT distinct
    /// attestations one after the other (one core), RUNS times; then, each run, COUNT assertions (one by each attested
    /// key, its counter one above the last) with ``AppAttestVerifier/verifyAssertion(_:clientData:publicKey:storedCounter:)``.
    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Time AppAttestVerifier on one core: distinct attestations, then assertions, verified one at a time.",
            discussion: """
                Prints one JSON line: attestations verified per second of each run and their median, the median and \
                99th percentile of one attestation (µs), the µs of one assertion (each run's mean; the median of runs), \
                and the CPU time the process used per second of the runs (about 1.0: one core). The stand-in's \
                attestations are valid at its clock's now, at which they are verified.
                """)

        @OptionGroup var options: BenchmarkRuns

        struct Result: Codable {
            var count: Int
            var runs: [Double]
            var attestationsPerSecond: Double
            var p50Micros: Double
            var p99Micros: Double
            var assertionRuns: [Double]
            var assertionMicros: Double
            var cpuPerWallSecond: Double
            var attestationBytes: Int
            var assertionBytes: Int
        }

        /// An attestation as a server receives it: the object, the key id's bytes and the challenge.
        struct Attestation {
            var keyId: String
            var keyIdBytes: [UInt8]
            var challenge: [UInt8]
            var object: [UInt8]
        }

        func run() async throws {
            let (count, runs) = (options.count, options.runs)
            let clock = DevSystemClock()
            let standIn = DevAppAttest(clock: clock)
            let verifier = try AppAttestVerifier(
                teamId: AppAttestBenchmark.teamId, bundleId: AppAttestBenchmark.bundleId, environment: .development,
                rootCertificates: [standIn.rootCertificateDER])
            let started = ContinuousClock.now
            let made = try (0..<(count + 200)).map { _ in
                let keyId = standIn.generateKey()
                let challenge = Array(UUID().uuidString.utf8)
                let object = try standIn.attestKey(
                    keyId, clientDataHash: AppAttestBenchmark.sha256(challenge), teamId: AppAttestBenchmark.teamId,
                    bundleId: AppAttestBenchmark.bundleId, environment: .development)
                return Attestation(keyId: keyId, keyIdBytes: Array(Data(base64Encoded: keyId)!), challenge: challenge, object: object)
            }
            AppAttestBenchmark.note("made \(made.count) attestations in \(String(format: "%.1f", BenchmarkRuns.seconds(.now - started))) s")
            let (warmUp, measured) = (Array(made.prefix(200)), Array(made.dropFirst(200)))
            var rates: [Double] = [], assertionMicros: [Double] = [], samples: [Double] = [], ignored: [Double] = []
            var keys: [AttestedKey] = []
            var assertionBytes = 0
            samples.reserveCapacity(count * runs)
            let cpu = try await options.measure { run in
                let date = clock.now
                func verify(_ attestation: Attestation) async throws -> AttestedKey {
                    try await verifier.verifyAttestation(attestation.object, keyId: attestation.keyIdBytes, challenge: attestation.challenge, at: date)
                }
                _ = try await BenchmarkRuns.timeEach(warmUp, samples: &ignored, verify)
                let (rate, verified) = try await BenchmarkRuns.timeEach(measured, samples: &samples, verify)
                rates.append(rate)
                if keys.isEmpty { keys = verified }
                // One assertion by each key, made before the clock starts; the key's counter was run − 1.
                let assertions = try measured.map { attestation in
                    let clientData = AssertionHeader.clientData(
                        method: "POST", path: AppAttestBenchmark.actionPath, nonce: UUID().uuidString, bodySHA256: AppAttestBenchmark.emptyBodySHA256)
                    let object = try standIn.generateAssertion(attestation.keyId, clientDataHash: AppAttestBenchmark.sha256(clientData))
                    return (object, clientData)
                }
                assertionBytes = assertions[0].0.count
                let start = ContinuousClock.now
                for (index, (object, clientData)) in assertions.enumerated() {
                    let counter = try verifier.verifyAssertion(
                        object, clientData: clientData, publicKey: keys[index].publicKey, storedCounter: UInt32(run - 1))
                    guard counter == UInt32(run) else { throw BenchmarkFailure("assertion counter \(counter), not \(run)") }
                }
                assertionMicros.append(BenchmarkRuns.seconds(.now - start) * 1e6 / Double(assertions.count))
                AppAttestBenchmark.note(
                    "run \(run)/\(runs): \(Int(rate)) attestations/s; an assertion \(String(format: "%.1f", assertionMicros[run - 1])) µs")
            }
            let (p50, p99) = SDKBenchmark.percentiles(&samples)
            try BenchmarkRuns.printJSON(
                Result(
                    count: count, runs: rates, attestationsPerSecond: BenchmarkRuns.median(rates), p50Micros: p50, p99Micros: p99,
                    assertionRuns: assertionMicros, assertionMicros: BenchmarkRuns.median(assertionMicros), cpuPerWallSecond: cpu,
                    attestationBytes: measured[0].object.count, assertionBytes: assertionBytes))
        }
    }

    /// `tally-dev bench-appattest action`: the server CPU an assertion adds to `POST /v1/actions/{name}`.
    ///
    /// Method. Two `tally serve` processes (`ServerBinary`: the `tally` beside this binary; SQLite, each in its own temporary data directory), configured
    /// alike — a quota action `bench.metered` (a daily quota of 1,000,000, then 1 token; no sign-up grant) — but for
    /// `appAttest.mode`: `enforce` (trusting the stand-in's root) on one, `off` on the other. USERS guests on each: on
    /// the enforce server each signs in with an attestation of its device key. Then RUNS pairs of blocks, one block on
    /// each server, the order alternating: a block is REQUESTS metered actions sent one at a time on one keep-alive
    /// connection (or on CONNECTIONS, each one at a time, a user's requests on one), each with a fresh
    /// `Idempotency-Key` and an `X-Tally-Assertion` by the user's key over that key (made before the block starts).
    /// Both servers receive the same requests, byte for byte in size, and do the same ledger work (a quota use, its
    /// idempotency record); the off server ignores the header, the enforce server reads the key, verifies the
    /// assertion and raises the key's counter (a compare-and-set UPDATE) — without which, having no tokens, the call
    /// would fail, so every 200 is an accepted assertion. A block's cost is the server process's CPU time (user +
    /// system, all threads: `clock_getcpuclockid`, nanoseconds) over the block, divided by REQUESTS; the client's own
    /// CPU is not in it. Printed: each arm's median µs per request, and the median over pairs of the difference (the
    /// added CPU of an assertion), with wall time per request likewise. One connection is the costliest case for the
    /// server's hand-offs between threads (each wakes one that sleeps); with several, they overlap. Linux only.
    struct Action: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The server CPU an assertion adds to a metered action: tally serve with App Attest enforced against off, alternating blocks.",
            discussion: """
                Prints one JSON line: server CPU µs per request of each block, on the `enforce` and `off` servers, their \
                medians, and the median over pairs of the difference (the added CPU of an assertion); wall µs per \
                request likewise. See the source's documentation for the method.
                """)

        @Option(help: "Pairs of blocks (one on each server, the order alternating); medians are reported.") var runs = 10
        @Option(help: "Metered actions in each block.") var requests = 2_000
        @Option(help: "Guests on each server; a block's requests go round them.") var users = 100
        @Option(help: "Connections per block, each sending one request at a time (a user's requests on one).") var connections = 1
        @Option(help: "The tally binary to serve (default: TALLY_BIN, else the tally beside this binary).") var binary: String?

        func validate() throws {
            guard runs > 0, requests > 0, users > 0, connections > 0 else {
                throw ValidationError("--runs, --requests, --users and --connections must be positive")
            }
            guard users >= connections else { throw ValidationError("--users must be at least --connections") }
        }

        struct Result: Codable {
            var runs: Int
            var requests: Int
            var users: Int
            var connections: Int
            var offCPUMicros: [Double]
            var enforceCPUMicros: [Double]
            var offCPUMicrosMedian: Double
            var enforceCPUMicrosMedian: Double
            var addedCPUMicros: Double
            var offWallMicrosMedian: Double
            var enforceWallMicrosMedian: Double
            var addedWallMicros: Double
            var assertionHeaderBytes: Int
        }

        func run() async throws {
            let executable = try ServerBinary.path(binary)
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-bench-appattest-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let standIn = DevAppAttest()
            let root = directory.appendingPathComponent("root.der")
            try Data(standIn.rootCertificateDER).write(to: root)

            let off = try await Server(executable, mode: "off", root: root, directory: directory)
            defer { off.stop() }
            let enforce = try await Server(executable, mode: "enforce", root: root, directory: directory)
            defer { enforce.stop() }
            let keys = (0..<users).map { _ in standIn.generateKey() }
            var offTokens: [String] = [], enforceTokens: [String] = []
            for key in keys {
                offTokens.append(try await off.signIn(attestation: nil))
                let challenge = try await enforce.call(.POST, "/v1/auth/attestation/challenge", as: AttestationChallenge.self).challenge
                let object = try standIn.attestKey(
                    key, clientDataHash: AppAttestBenchmark.sha256(Array(challenge.utf8)), teamId: AppAttestBenchmark.teamId,
                    bundleId: AppAttestBenchmark.bundleId, environment: .development)
                let attestation = AppAttestation(keyId: key, attestation: Data(object).base64EncodedString(), challenge: challenge)
                enforceTokens.append(try await enforce.signIn(attestation: attestation))
            }
            AppAttestBenchmark.note("\(users) guests on each server (attested on the enforce server); warming up")
            let warmUp = min(requests, 500)
            _ = try await off.block(warmUp, connections: connections, tokens: offTokens, keys: keys, standIn: standIn)
            _ = try await enforce.block(warmUp, connections: connections, tokens: enforceTokens, keys: keys, standIn: standIn)

            var offCPU: [Double] = [], enforceCPU: [Double] = [], addedCPU: [Double] = []
            var offWall: [Double] = [], enforceWall: [Double] = [], addedWall: [Double] = []
            for run in 1...runs {
                var pair: [String: (cpu: Double, wall: Double)] = [:]
                for server in run % 2 == 1 ? [off, enforce] : [enforce, off] {
                    pair[server.mode] = try await server.block(
                        requests, connections: connections, tokens: server === off ? offTokens : enforceTokens, keys: keys, standIn: standIn)
                }
                let (a, b) = (pair["off"]!, pair["enforce"]!)
                offCPU.append(a.cpu); enforceCPU.append(b.cpu); addedCPU.append(b.cpu - a.cpu)
                offWall.append(a.wall); enforceWall.append(b.wall); addedWall.append(b.wall - a.wall)
                AppAttestBenchmark.note(
                    String(
                        format: "run %d/%d: server CPU a request off %.1f µs, enforce %.1f µs (+%.1f); wall %.0f / %.0f µs", run, runs,
                        a.cpu, b.cpu, b.cpu - a.cpu, a.wall, b.wall))
            }
            let header = try AppAttestBenchmark.assertionHeader(standIn, keyId: keys[0], nonce: UUID().uuidString)
            try BenchmarkRuns.printJSON(
                Result(
                    runs: runs, requests: requests, users: users, connections: connections, offCPUMicros: offCPU, enforceCPUMicros: enforceCPU,
                    offCPUMicrosMedian: BenchmarkRuns.median(offCPU), enforceCPUMicrosMedian: BenchmarkRuns.median(enforceCPU),
                    addedCPUMicros: BenchmarkRuns.median(addedCPU), offWallMicrosMedian: BenchmarkRuns.median(offWall),
                    enforceWallMicrosMedian: BenchmarkRuns.median(enforceWall), addedWallMicros: BenchmarkRuns.median(addedWall),
                    assertionHeaderBytes: header.utf8.count))
        }
    }

    /// One `tally serve` child on SQLite with `appAttest.mode` as given, and a keep-alive connection to it.
    final class Server {
        let mode: String
        let process: ChildProcess
        let port: Int
        /// The set-up's calls (sign-ins); each block opens its own.
        let connection: LoadConnection

        /// Starts the server in `directory`/`mode` and waits until it listens (at most 60 s).
        init(_ executable: String, mode: String, root: URL, directory: URL) async throws {
            self.mode = mode
            let home = directory.appendingPathComponent(mode)
            try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
            let config = home.appendingPathComponent("config.json"), log = home.appendingPathComponent("server.log")
            try Data(
                """
                {"signupGrant": 0, "guestSignupsPerIPPerHour": 1000000000,
                 "quotas": [{"name": "bench.free", "daily": 1000000}],
                 "actions": [{"name": "bench.metered", "quota": "bench.free", "tokens": 1}],
                 "limits": {"attestationsPerAddress": {"limit": 1000000000, "seconds": 3600}},
                 "appAttest": {"teamId": "\(AppAttestBenchmark.teamId)", "bundleId": "\(AppAttestBenchmark.bundleId)",
                   "environment": "development", "mode": "\(mode)", "rootCertificates": ["\(root.path)"]}}
                """.utf8
            ).write(to: config)
            var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("TALLY_") && $0.key != "DATABASE_URL" }
            environment["TALLY_CONFIG"] = config.path
            process = try ChildProcess(
                executable,
                arguments: ["serve", "--port", "0", "--admin-port", "0", "--data-dir", home.appendingPathComponent("data").path],
                environment: environment, standardOutput: .file(log), standardError: .file(log))
            for _ in 0..<1_200 {
                let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("tally listening on http://127.0.0.1:") }),
                    let port = Int(line.dropFirst("tally listening on http://127.0.0.1:".count).prefix { $0.isNumber })
                {
                    self.port = port
                    connection = LoadConnection(host: "127.0.0.1", port: port, group: MultiThreadedEventLoopGroup.singleton)
                    return
                }
                guard process.isRunning else { throw BenchmarkFailure("tally serve (\(mode)) exited:\n\(text)") }
                try await Task.sleep(for: .milliseconds(50))
            }
            process.terminate()
            throw BenchmarkFailure("tally serve (\(mode)) did not listen within 60 s; see \(log.path)")
        }

        /// Stops the server (SIGTERM) and waits for it to exit.
        func stop() {
            process.terminate()
            _ = process.waitUntilExit()
        }

        /// Sends `method path` (with the JSON `body`) and decodes its 2xx answer as `type`.
        func call<T: Decodable>(_ method: HTTPMethod, _ path: String, body: [UInt8]? = nil, as type: T.Type) async throws -> T {
            let response = try await connection.send(LoadRequest(method, path, body: body))
            guard (200..<300).contains(response.status) else {
                throw BenchmarkFailure("\(method) \(path) (\(mode)) answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
            }
            return try TallyJSON.decoder().decode(T.self, from: Data(response.body))
        }

        /// A new guest (with `attestation`, if any); its access token.
        func signIn(attestation: AppAttestation?) async throws -> String {
            let body = GuestSignInRequest(deviceId: "bench-\(UUID().uuidString)", attestation: attestation)
            return try await call(.POST, "/v1/auth/guest", body: Array(try TallyJSON.encoder().encode(body)), as: SessionTokens.self).accessToken
        }

        /// `count` metered actions, the i-th by user i mod users with an assertion by its key, on `connections`
        /// connections each sending one at a time (a user's requests all on one, in their counters' order); the server
        /// process's CPU µs and the wall µs per request.
        func block(
            _ count: Int, connections: Int, tokens: [String], keys: [String], standIn: DevAppAttest
        ) async throws -> (cpu: Double, wall: Double) {
            // Made before the clock starts: a fresh idempotency key each, and an assertion over it.
            var lanes = [[LoadRequest]](repeating: [], count: connections)
            for index in 0..<count {
                let user = index % tokens.count, nonce = UUID().uuidString
                lanes[user % connections].append(
                    LoadRequest(
                        .POST, AppAttestBenchmark.actionPath,
                        headers: [
                            ("Authorization", "Bearer \(tokens[user])"), ("Idempotency-Key", nonce),
                            (AssertionHeader.name, try AppAttestBenchmark.assertionHeader(standIn, keyId: keys[user], nonce: nonce)),
                        ]))
            }
            let (port, mode) = (port, mode)
            let cpuBefore = try cpuSeconds()
            let started = ContinuousClock.now
            try await withThrowingTaskGroup(of: Void.self) { group in
                for lane in lanes {
                    group.addTask {
                        let connection = LoadConnection(host: "127.0.0.1", port: port, group: MultiThreadedEventLoopGroup.singleton)
                        do {
                            for request in lane {
                                let response = try await connection.send(request)
                                guard response.status == 200 else {
                                    let text = String(decoding: response.body, as: UTF8.self)
                                    throw BenchmarkFailure("\(mode): POST \(AppAttestBenchmark.actionPath) answered \(response.status): \(text)")
                                }
                            }
                        } catch {
                            await connection.close()
                            throw error
                        }
                        await connection.close()
                    }
                }
                try await group.waitForAll()
            }
            let wall = BenchmarkRuns.seconds(.now - started)
            let cpu = try cpuSeconds() - cpuBefore
            return (cpu * 1e6 / Double(count), wall * 1e6 / Double(count))
        }

        /// The server process's CPU seconds (user + system, every thread, those ended included), to the nanosecond.
        func cpuSeconds() throws -> Double {
            #if canImport(Glibc)
            var clock = clockid_t()
            var time = timespec()
            guard clock_getcpuclockid(process.processIdentifier, &clock) == 0, clock_gettime(clock, &time) == 0 else {
                throw BenchmarkFailure("cannot read the CPU clock of process \(process.processIdentifier)")
            }
            return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
            #else
            throw BenchmarkFailure("bench-appattest action reads another process's CPU clock: Linux only")
            #endif
        }
    }
}
