// swift-tools-version:6.1
import PackageDescription

/// Seed 003's habit tracker on Tally: habits and daily logs as synced collections, instant toggles, offline
/// weeks, a widget process, month views read from the device. Depends on the SDK by path.
let package = Package(
    name: "HabitTracker",
    platforms: [.iOS(.v17), .macOS(.v14)],
    products: [.executable(name: "habit-tracker", targets: ["habit-tracker"])],
    dependencies: [
        .package(path: "../../Client"),
        .package(path: "../ExampleSupport"),
    ],
    targets: [
        // The app's logic: models and the @Observable view model, no UI framework.
        .target(name: "HabitTrackerCore", dependencies: [.product(name: "TallyClient", package: "Client")]),
        // The command-line driver: prints what the screen would show; `widget-log` is the widget's process.
        .executableTarget(name: "habit-tracker", dependencies: ["HabitTrackerCore", "ExampleSupport"]),
        // The tests run the driver too (as the widget's process), so they depend on it to have it built.
        .testTarget(name: "HabitTrackerTests", dependencies: ["HabitTrackerCore", "habit-tracker", "ExampleSupport"]),
    ]
)
