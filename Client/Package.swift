// swift-tools-version:6.1
import PackageDescription

/// The Tally SDK on its own: what an app adds. It declares the OS versions apps ship to and depends on GRDB and
/// swift-metrics only; the server package at the repository's root uses it by path, so there is one copy.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "TallyClient",
    platforms: [.iOS(.v15), .macOS(.v12), .tvOS(.v15), .watchOS(.v8)],
    products: [
        .library(name: "TallyAPI", targets: ["TallyAPI"]),
        .library(name: "TallyClient", targets: ["TallyClient"]),
        // For an app's tests and Tally's own: the manual clock.
        .library(name: "TallyTestKit", targets: ["TallyTestKit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
    ],
    targets: [
        // Wire types shared by the server, the SDK and apps: Foundation only.
        .target(name: "TallyAPI", swiftSettings: swiftSettings),
        // The client SDK for iOS and Linux: session, transport, query cache, optimistic mutations.
        .target(
            name: "TallyClient",
            dependencies: [
                "TallyAPI",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        // What tests of an app, the SDK and the server share: a clock that moves only when told to.
        .target(name: "TallyTestKit", dependencies: ["TallyAPI"], swiftSettings: swiftSettings),
        // The SDK's own tests: its pure parts and the client against scripted transports, no server
        // (`cd Client && swift test`). The tests against a real server are the root package's `TallyClientTests`.
        .testTarget(
            name: "TallyClientUnitTests",
            dependencies: ["TallyClient", "TallyAPI", "TallyTestKit", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: swiftSettings
        ),
    ]
)
