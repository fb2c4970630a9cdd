import Foundation
import TallyAPI
import Testing

/// The SDK ships to iOS 15 / macOS 12, but CI builds on Linux, where the compiler does not check Apple
/// availability. This suite does what it can instead: it reads the SDK's sources (TallyClient and the wire
/// types in TallyAPI) and fails on API that those OS versions lack, outside files that are themselves
/// annotated for later versions.
@Suite("The SDK uses no API above iOS 15 / macOS 12", .timeLimit(.minutes(1)))
struct DeploymentTargetTests {
    /// API newer than iOS 15 / macOS 12, and what to use instead.
    static let newerAPI: [(pattern: String, instead: String)] = [
        ("import Synchronization", "Locked (Support/Locked.swift)"),
        ("Mutex<", "Locked"),
        ("Atomic<", "Locked"),
        ("Duration", "TimeInterval seconds"),
        ("ContinuousClock", "DispatchTime or the injected TallyClock"),
        ("SuspendingClock", "the injected TallyClock"),
        ("Task.sleep(for:", "TallyClock.sleep(for:) or Task.sleep(nanoseconds:)"),
        ("Regex", "string scanning"),
        ("#/", "string scanning (regex literals need iOS 16)"),
        (".formatted(", "a formatter object"),
        ("URL(filePath:", "URL(fileURLWithPath:)"),
        (".appending(path:", "appendingPathComponent(_:)"),
        ("@Observable", "an @available(iOS 17, macOS 14, …) declaration"),
    ]

    @Test func noNewerAPIOutsideAvailabilityAnnotatedFiles() throws {
        let files = try SDKSources.files()
        #expect(files.count > 20, "found \(files.count) SDK source files under \(SDKSources.root.path)")
        var offences: [String] = []
        for file in files {
            // A file whose declarations are all annotated for iOS 17 (ObservedQuery) may use what that allows.
            if file.text.contains("@available(iOS 17") { continue }
            for (number, line) in file.text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let code = line.components(separatedBy: "//").first ?? ""
                for rule in Self.newerAPI where code.contains(rule.pattern) {
                    offences.append("\(file.path):\(number + 1): \(rule.pattern) (use \(rule.instead))")
                }
            }
        }
        #expect(offences.isEmpty, "API above iOS 15 / macOS 12 in the SDK:\n\(offences.joined(separator: "\n"))")
    }

    @Test func observationIsOnlyUsedFromIOS17() throws {
        for file in try SDKSources.files() where file.text.contains("import Observation") {
            #expect(file.text.contains("@available(iOS 17, macOS 14"), "\(file.path) imports Observation without @available")
        }
    }
}
