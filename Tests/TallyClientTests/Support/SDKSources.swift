import Foundation

/// The SDK's Swift sources (TallyClient and TallyAPI in `Client/`), read from the checkout this test file is in:
/// the tests that check what the SDK's code and doc comments may contain read them through this.
enum SDKSources {
    /// The repository root, found from this file's location.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// Every Swift file of the SDK's modules, as a path relative to the root and its text.
    static func files() throws -> [(path: String, text: String)] {
        var files: [(String, String)] = []
        for module in ["Client/Sources/TallyClient", "Client/Sources/TallyAPI"] {
            let directory = root.appendingPathComponent(module)
            guard let walker = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil) else { continue }
            for case let url as URL in walker where url.pathExtension == "swift" {
                files.append((String(url.path.dropFirst(root.path.count + 1)), try String(contentsOf: url, encoding: .utf8)))
            }
        }
        return files
    }
}
