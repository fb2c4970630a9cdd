// swift-tools-version:6.1
import PackageDescription

/// Settings shared by every target, in the manner of Hummingbird's manifest.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

/// The SDK's products, from the package in `Client/`.
let tallyAPI: Target.Dependency = .product(name: "TallyAPI", package: "Client")
let tallyClient: Target.Dependency = .product(name: "TallyClient", package: "Client")
/// The manual clock every test target moves time with.
let tallyTestKit: Target.Dependency = .product(name: "TallyTestKit", package: "Client")

/// Tests keep strict concurrency but not the import-visibility check, which adds noise and no safety there.
let testSwiftSettings: [SwiftSetting] = [.enableUpcomingFeature("ExistentialAny")]

let package = Package(
    name: "tally",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "TallyServer", targets: ["TallyServer"]),
        // The server's command: serve, migrate, admin. Nothing of the workshop is linked into it.
        .executable(name: "tally", targets: ["tally"]),
        // The workshop: the local stand-ins (dev-llm, dev-appstore), the demo, the benchmarks, the load test and the
        // tests' probes. The benchmarks that need a server start `tally serve` (the `tally` binary beside it).
        .executable(name: "tally-dev", targets: ["tally-dev"]),
    ],
    dependencies: [
        // The SDK and the wire types: a package of their own (iOS 15 / macOS 12, GRDB and swift-metrics only),
        // so that an app adding the SDK resolves nothing of the server's.
        .package(path: "Client"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth.git", from: "2.5.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        // 5.8.0: X5CVerifier with a validation time the verifier chooses (App Store signed data at its signedDate).
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        // The App Store's certificate chains: policies over the x5c chain (Apple's OIDs), and test chains.
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        // The AI gateway's calls to an OpenAI-compatible upstream (TLS for a hosted provider, streaming bodies).
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        // The operator's console: server-rendered HTML, HTML-escaped by default (issue 35).
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", exact: "2.1.1"),
    ],
    targets: [
        // Domain model, pure rules, clocks and the storage protocol.
        .target(
            name: "TallyStore",
            dependencies: [
                tallyAPI,
            ],
            swiftSettings: swiftSettings
        ),
        // The embedded store: SQLite through GRDB.
        .target(
            name: "TallySQLite",
            dependencies: [
                "TallyStore",
                .product(name: "GRDB", package: "GRDB.swift"),
                // The WAL hook and checkpoint calls (``Checkpointer``) are SQLite's C API.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        // The scale-out store: PostgreSQL through PostgresNIO.
        .target(
            name: "TallyPostgres",
            dependencies: [
                "TallyStore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // What the three Apple-protocol modules below share, and nothing of Tally: compact JWS (base64url, the split), the
        // ES256 bearer tokens Apple's server APIs take and their reuse, and the bounded HTTP call that carries one.
        .target(
            name: "TallyAppleJWS",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // App Store signed data (StoreKit 2 transactions, App Store Server Notifications V2): the payloads and their
        // verification (ES256, the x5c chain to a configured root, Apple's OIDs, at the payload's signedDate).
        .target(
            name: "TallyAppStore",
            dependencies: [
                "TallyAppleJWS",
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                // The App Store Server API client (AppStoreServerAPIClient).
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // App Attest and DeviceCheck: Apple's attestation and assertion objects verified (CBOR and WebAuthn
        // authenticator data read bounded and total; the x5c chain to the App Attestation root) and DeviceCheck's two
        // bits, so free uses can belong to real devices. No Tally module but TallyAppleJWS: it speaks Apple's protocols.
        .target(
            name: "TallyAppAttest",
            dependencies: [
                "TallyAppleJWS",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Sign in with Apple: identity tokens and account notifications verified (RS256 with Apple's keys, fetched and
        // cached), the client secret, and Apple's token and revoke endpoints. No Tally module but TallyAppleJWS: it speaks
        // Apple's protocol.
        .target(
            name: "TallyAppleID",
            dependencies: [
                "TallyAppleJWS",
                .product(name: "Crypto", package: "swift-crypto"),
                // RSA (`_RSA.Signing`): Apple signs identity tokens with RS256.
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // `tally-dev dev-appstore`: a local stand-in for the App Store (a test CA with Apple's OIDs, signed transactions,
        // notifications delivered with retries), never part of the server.
        .target(
            name: "TallyDevAppStore",
            dependencies: [
                tallyAPI, "TallyAppStore", "TallyAppleID", "TallyAppleJWS", "TallyAppAttest",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),  // Sign in with Apple's RSA keys
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The HTTP server: buildApplication, routes by feature, middleware.
        .target(
            name: "TallyServer",
            dependencies: [
                tallyAPI, "TallyStore", "TallySQLite", "TallyPostgres", "TallyAppStore", "TallyAppleID", "TallyAppAttest",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Mustache", package: "swift-mustache"),
            ],
            swiftSettings: swiftSettings
        ),
        // The local OpenAI-compatible model (`tally-dev dev-llm`): a stand-in for an LLM provider, never part of the server.
        .target(
            name: "TallyDevLLM",
            dependencies: [
                tallyAPI,
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // `pipe2` and `posix_spawn_file_actions_addclosefrom_np` for TallyLoad's `ChildProcess` (Glibc hides both).
        .target(name: "CSpawn"),
        // The load harness: simulated app users over real connections, the books check, the report.
        .target(
            name: "TallyLoad",
            dependencies: [
                tallyAPI, tallyClient,
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                "CSpawn",
            ],
            swiftSettings: swiftSettings
        ),
        // The server's command line: serve, migrate, admin. No dev module (TallyDevAppStore, TallyDevLLM, TallyLoad):
        // CommandLineSplitTests checks this block.
        .executableTarget(
            name: "tally",
            dependencies: [
                tallyAPI, "TallyServer", "TallyStore", "TallySQLite", "TallyPostgres",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The workshop's command line (`tally-dev`): dev-llm, dev-appstore, demo, the benchmarks, loadtest, the probes.
        .executableTarget(
            name: "tally-dev",
            dependencies: [
                tallyAPI, tallyClient, "TallyLoad", "TallyServer", "TallyStore", "TallyAppStore", "TallyAppAttest", "TallyDevLLM",
                "TallyDevAppStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // bench-ai's streams, each worker on an event loop of its own.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                // bare-proxy: the server's HTTP stack with none of Tally's work, a benchmark's baseline.
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // What the test targets share: `StoreKind`, `LocalModel` (dev-llm in-process), the PostgreSQL rule (`postgresURL()`: skipped with a warning without
        // a database, failed under TALLY_REQUIRE_POSTGRES=1), `ScratchDatabase`, `TallyBinary`, `LedgerInvariants`,
        // `SplitMix64` (the load harness's seeded generator), `MailStandIn` (a mail hook that checks signatures).
        .target(
            name: "TallyTestSupport",
            dependencies: [
                tallyAPI, tallyTestKit, "TallyStore", "TallyPostgres", "TallyLoad", "TallyDevLLM", "TallyDevAppStore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),  // OutageProxy
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tests/TallyTestSupport",
            swiftSettings: testSwiftSettings
        ),
        .testTarget(
            name: "TallyStoreTests",
            dependencies: [
                "TallyStore", "TallySQLite", "TallyPostgres", "TallyTestSupport", tallyTestKit,
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: testSwiftSettings
        ),
        .testTarget(
            name: "TallyClientTests",
            dependencies: [
                tallyClient, tallyAPI, tallyTestKit, "TallyServer", "TallyStore", "TallyLoad", "TallyTestSupport",
                // The AI client's tests script the local model (`DevStats`); the purchase tests buy from the local App Store.
                "TallyDevLLM", "TallyDevAppStore", "TallyAppAttest",
                .product(name: "GRDB", package: "GRDB.swift"),
                // The push crash tests' proxy (CrashingProxy).
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: testSwiftSettings
        ),
        .testTarget(
            name: "TallyAppStoreTests",
            dependencies: [
                "TallyAppStore", "TallyDevAppStore",
                // The stand-in's deliveries on the test kit's ManualClock, to a receiver in the test (Hummingbird),
                // and its HTTP API called for real (AsyncHTTPClient).
                "TallyStore", tallyTestKit,
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: testSwiftSettings
        ),
        .testTarget(
            name: "TallyAppAttestTests",
            dependencies: [
                // Apple's published attestations, and the stand-in's (its App Attestation CA and DeviceCheck, over
                // loopback HTTP).
                "TallyAppAttest", "TallyDevAppStore", tallyTestKit,
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: testSwiftSettings
        ),
        .testTarget(
            name: "TallyAppleIDTests",
            dependencies: [
                // The verifier and the token client against the stand-in's Sign in with Apple, served over loopback HTTP;
                // TallyAppleJWS, the pieces it shares with the DeviceCheck and App Store Server API clients.
                "TallyAppleID", "TallyAppleJWS", "TallyDevAppStore", tallyTestKit,
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: testSwiftSettings
        ),
        .testTarget(
            name: "TallyLoadTests",
            dependencies: ["TallyLoad", "TallyTestSupport", tallyAPI, tallyTestKit],
            swiftSettings: testSwiftSettings
        ),
        .testTarget(
            name: "TallyServerTests",
            dependencies: [
                "TallyServer", "TallyStore", "TallySQLite", "TallyPostgres", "TallyLoad", "TallyTestSupport", "TallyDevLLM", tallyTestKit,
                // Purchases are tested against the local App Store stand-in, in process.
                "TallyAppStore", "TallyDevAppStore", "TallyAppleID", "TallyAppAttest",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: testSwiftSettings
        ),
    ]
)
