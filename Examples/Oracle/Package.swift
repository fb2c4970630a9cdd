// swift-tools-version:6.1
import PackageDescription

/// Seeds 002 and 004 on Tally: a guest with three free readings a day and tokens after that, a chat whose
/// history is a synced collection metered per message, restored on a reinstall, a face reading from a photo and
/// questions about a picture or a clip through the AI gateway, and a wallet that follows the server's events.
/// Depends on the SDK by path.
let package = Package(
    name: "Oracle",
    platforms: [.iOS(.v17), .macOS(.v14)],
    products: [.executable(name: "oracle", targets: ["oracle"])],
    dependencies: [
        .package(path: "../../Client"),
        .package(path: "../ExampleSupport"),
    ],
    targets: [
        // The app's logic: the @Observable session, no UI framework.
        .target(name: "OracleCore", dependencies: [.product(name: "TallyClient", package: "Client")]),
        // The command-line driver: prints what the screen would show.
        .executableTarget(name: "oracle", dependencies: ["OracleCore", "ExampleSupport"]),
        // Fixtures/ (photos and a clip's frames) is read through #filePath, as tally.yaml is.
        .testTarget(name: "OracleTests", dependencies: ["OracleCore", "ExampleSupport"], exclude: ["Fixtures"]),
    ]
)
