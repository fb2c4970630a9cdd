import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process started with `posix_spawn` (Foundation's `Process` crashes intermittently on Linux in
/// swift-corelibs-foundation), its output in files.
public final class ChildProcess: @unchecked Sendable {
    /// The process id.
    public let pid: pid_t
    /// Where its standard output goes.
    public let output: URL
    private let lock = NSLock()
    private var status: Int32?

    /// Starts `executable arguments…` with `environment` added to this process's; output to `output` (and
    /// errors to `output` + ".err").
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:], output: URL) throws {
        self.output = output
        // Darwin's posix_spawn_file_actions_t is an opaque pointer (nil until posix_spawn_file_actions_init allocates
        // it), Glibc's a struct: the declaration TallyLoad's ChildProcess uses, so this compiles on macOS too.
        #if canImport(Darwin)
        var actions: posix_spawn_file_actions_t? = nil
        #else
        var actions = posix_spawn_file_actions_t()
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, output.path + ".err", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let merged = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid = pid_t()
        let result = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        guard result == 0 else { throw ExampleError("cannot start \(executable): \(String(cString: strerror(result)))") }
        self.pid = pid
    }

    /// Sends `signal` (SIGTERM by default) if the process still runs.
    public func signal(_ signal: Int32 = SIGTERM) { if exitStatus == nil { kill(pid, signal) } }

    /// The exit status once it ended (a signal shows as 128 + its number), or nil.
    public var exitStatus: Int32? {
        lock.lock()
        defer { lock.unlock() }
        if let status { return status }
        var raw: Int32 = 0
        guard waitpid(pid, &raw, WNOHANG) == pid else { return nil }
        let signalled = raw & 0x7f
        status = signalled == 0 ? (raw >> 8) & 0xff : 128 + signalled
        return status
    }

    /// Waits (polling every 20 ms, at most `limit`) for the process to end; its status.
    public func wait(limit: Duration = .seconds(60)) async throws -> Int32 {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if let exitStatus { return exitStatus }
            try await Task.sleep(for: .milliseconds(20))
        }
        signal(SIGKILL)
        throw ExampleError("\(output.lastPathComponent) did not end within \(limit)")
    }

    /// Waits (polling every 20 ms, at most `limit`) until `parse` finds what it looks for in the standard output so
    /// far (a "listening on" line); throws when the process ends first or the time is up. `name` is for the message.
    public func awaitOutput<T>(_ name: String, limit: Duration = .seconds(30), _ parse: (String) -> T?) async throws -> T {
        let deadline = ContinuousClock.now + limit
        while true {
            if let value = parse(text) { return value }
            if let status = exitStatus { throw ExampleError("\(name) exited with \(status): \(errors)") }
            guard ContinuousClock.now < deadline else { throw ExampleError("\(name) did not start within \(limit): \(errors)") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// What it wrote to standard output so far.
    public var text: String { (try? String(contentsOf: output, encoding: .utf8)) ?? "" }
    /// What it wrote to standard error so far.
    public var errors: String { (try? String(contentsOf: URL(fileURLWithPath: output.path + ".err"), encoding: .utf8)) ?? "" }

    deinit { signal(SIGKILL); _ = exitStatus }
}

/// A failure of an example's harness.
public struct ExampleError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
