import Foundation

/// The built binaries that tests start as processes: the server's `tally` and the workshop's `tally-dev`.
public enum TallyBinary {
    /// `tally` (serve, migrate, admin): `TALLY_BIN` (set by scripts/test), else the debug build of this checkout
    /// (`.build/debug/tally`).
    public static var path: String {
        if let path = ProcessInfo.processInfo.environment["TALLY_BIN"], !path.isEmpty { return path }
        return buildDirectory.appendingPathComponent("tally").path
    }

    /// `tally-dev` (dev-llm, dev-appstore, the probes, the benchmarks, loadtest): `TALLY_DEV_BIN` (set by
    /// scripts/test), else the debug build of this checkout (`.build/debug/tally-dev`).
    public static var devPath: String {
        if let path = ProcessInfo.processInfo.environment["TALLY_DEV_BIN"], !path.isEmpty { return path }
        return buildDirectory.appendingPathComponent("tally-dev").path
    }

    /// `.build/debug` of this checkout. This file is Tests/TallyTestSupport/TallyBinary.swift: three levels below
    /// the package root.
    private static var buildDirectory: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/debug")
    }
}
