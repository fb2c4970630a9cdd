import Foundation

/// The built `tally` binary that tests start as a process: `TALLY_BIN` (set by scripts/test), else the debug
/// build of this checkout (`.build/debug/tally`).
public enum TallyBinary {
    public static var path: String {
        if let path = ProcessInfo.processInfo.environment["TALLY_BIN"], !path.isEmpty { return path }
        // This file is Tests/TallyTestSupport/TallyBinary.swift: three levels below the package root.
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/tally").path
    }
}
