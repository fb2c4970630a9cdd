// swift-tools-version:6.1
import PackageDescription

/// What the example apps' tests and drivers share: a real `tally serve` as a child process, a real
/// `tally-dev dev-appstore` (the local App Store) and a real `tally-dev dev-llm` (the local model) beside it, and other
/// processes of the app (a widget). Foundation only.
let package = Package(
    name: "ExampleSupport",
    platforms: [.macOS(.v14)],
    products: [.library(name: "ExampleSupport", targets: ["ExampleSupport"])],
    targets: [.target(name: "ExampleSupport")]
)
