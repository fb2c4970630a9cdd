import CSpawn
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A child process started with `posix_spawn`: how this package starts every process (the load run's
/// `tally serve` servers, the fault run's database control command, the test suites' `tally` processes).
///
/// Foundation's `Process` is deliberately not used: on Linux its `run()` crashes intermittently with SIGSEGV
/// in `memcpy`, because `findMaximumOpenFromProcSelfFD()` copies all 256 bytes of `d_name` out of each
/// (shorter) `dirent` of `/proc/self/fd` and reads past the buffer (swift-corelibs-foundation PR #5472, not
/// in Swift 6.3.1). A suite that starts processes hit it about one run in five. Do not bring `Process` back
/// before the toolchain has that fix.
///
/// The child gets standard input, output and error as asked and no other descriptor of this process: files
/// and `/dev/null` are opened by the child itself (`posix_spawn_file_actions_addopen`), the input pipe is
/// created close-on-exec and duplicated onto descriptor 0 in the child, and every other descriptor is closed
/// in the child (`posix_spawn_file_actions_addclosefrom_np` on glibc 2.34+, `POSIX_SPAWN_CLOEXEC_DEFAULT` on
/// Darwin): also those this process inherited without close-on-exec (a test runner's sockets and pipes; with
/// an older glibc those would leak). Signal dispositions and the signal mask are reset to the defaults. The
/// child stays in this process's process group, so a Ctrl-C or a `timeout` that signals the group stops it too.
///
/// A thread of its own waits for each child, so no Swift concurrency thread ever blocks on it; it waits with
/// `waitid(WNOWAIT)` and reaps under the lock that `terminate()` and `kill()` take, so a signal never goes
/// to a process id that was reaped and may have been reused.
public final class ChildProcess: Sendable {
    /// Where the child's standard input comes from.
    public enum Input: Sendable {
        /// `/dev/null`: the child reads end of file at once.
        case empty
        /// A pipe written with ``ChildProcess/writeInput(_:)`` and closed with ``ChildProcess/closeInput()``.
        case pipe
    }

    /// Where the child's standard output or standard error goes.
    public enum Output: Sendable {
        /// `/dev/null`.
        case discard
        /// Appended to this file, which is created if absent (the same file may take both streams).
        case file(URL)
        /// This process's own standard output or error.
        case inherit
    }

    /// How a child ended.
    public enum Termination: Sendable, Hashable, CustomStringConvertible {
        /// It exited with this status; `-1` when its status was lost (reaped elsewhere, e.g. `SIGCHLD` ignored).
        case exited(Int32)
        /// This signal killed it.
        case signalled(Int32)

        /// From a `waitpid` status.
        init(waitStatus status: Int32) {
            let signal = status & 0x7f
            self = signal == 0 ? .exited((status >> 8) & 0xff) : .signalled(signal)
        }

        public var description: String {
            switch self {
            case .exited(let status): "exit status \(status)"
            case .signalled(let signal): "killed by signal \(signal)"
            }
        }
    }

    /// Why a child could not be started or written to.
    public struct Failure: Error, CustomStringConvertible {
        /// What went wrong.
        public let description: String
    }

    /// The child's process id.
    public let processIdentifier: pid_t
    private let exit: Exit
    /// The write end of the input pipe; nil without one or once closed.
    private let input: Mutex<Int32?>

    /// Starts `executable` (a path: no `PATH` search) with `arguments` and exactly `environment`.
    ///
    /// - Throws: ``Failure`` when the child cannot be started (no such executable, an output file that cannot
    ///   be opened…).
    public init(
        _ executable: String, arguments: [String] = [], environment: [String: String], standardInput: Input = .empty,
        standardOutput: Output = .discard, standardError: Output = .discard
    ) throws {
        let pipe = try standardInput == .pipe ? Self.inputPipe() : nil
        defer { if let pipe { close(pipe.readEnd) } }  // the child's end: this process needs no copy
        do {
            processIdentifier = try Self.spawn(
                executable, arguments: arguments, environment: environment, input: pipe?.readEnd, outputs: [standardOutput, standardError])
        } catch {
            if let pipe { close(pipe.writeEnd) }
            throw error
        }
        input = Mutex(pipe?.writeEnd)
        let exit = Exit()
        self.exit = exit
        let pid = processIdentifier
        Thread { exit.reap(pid) }.start()
    }

    deinit { closeInput() }

    /// `posix_spawn`s `executable` with standard input from `input` (else `/dev/null`) and standard output and
    /// error to `outputs`; its process id.
    private static func spawn(
        _ executable: String, arguments: [String], environment: [String: String], input: Int32?, outputs: [Output]
    ) throws -> pid_t {
        #if canImport(Darwin)
        var actions: posix_spawn_file_actions_t? = nil
        var attributes: posix_spawnattr_t? = nil
        #else
        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        #endif
        try check(posix_spawn_file_actions_init(&actions), "posix_spawn_file_actions_init")
        defer { posix_spawn_file_actions_destroy(&actions) }
        try check(posix_spawnattr_init(&attributes), "posix_spawnattr_init")
        defer { posix_spawnattr_destroy(&attributes) }

        if let input {
            try check(posix_spawn_file_actions_adddup2(&actions, input, 0), "posix_spawn_file_actions_adddup2")
        } else {
            try check(posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0), "posix_spawn_file_actions_addopen")
        }
        for (descriptor, output) in zip(Int32(1)..., outputs) {
            let opened: Int32 =
                switch output {
                case .discard: posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", O_WRONLY, 0)
                case .file(let url): posix_spawn_file_actions_addopen(&actions, descriptor, url.path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
                case .inherit: 0
                }
            try check(opened, "posix_spawn_file_actions_addopen")
        }
        let closed = cspawn_addclosefrom(&actions, 3)
        if closed != ENOSYS { try check(closed, "posix_spawn_file_actions_addclosefrom_np") }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        try check(posix_spawnattr_setsigmask(&attributes, &noSignals), "posix_spawnattr_setsigmask")
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        try check(posix_spawnattr_setsigdefault(&attributes, &allSignals), "posix_spawnattr_setsigdefault")
        #if canImport(Darwin)
        let flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_CLOEXEC_DEFAULT
        #else
        let flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        #endif
        try check(posix_spawnattr_setflags(&attributes, Int16(flags)), "posix_spawnattr_setflags")

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for string in argv + envp { free(string) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard spawned == 0 else { throw Failure(description: "cannot start \(executable): \(Self.message(spawned))") }
        return pid
    }

    /// The C library's words for error number `code`.
    private static func message(_ code: Int32) -> String { String(cString: strerror(code)) }

    private static func check(_ result: Int32, _ call: String) throws {
        guard result == 0 else { throw Failure(description: "\(call) failed: \(Self.message(result))") }
    }

    /// A pipe for the child's standard input, both ends close-on-exec.
    private static func inputPipe() throws -> (readEnd: Int32, writeEnd: Int32) {
        var ends: [Int32] = [-1, -1]
        guard cspawn_pipe_cloexec(&ends) == 0 else { throw Failure(description: "cannot create a pipe: \(Self.message(errno))") }
        return (ends[0], ends[1])
    }

    /// Whether the child has not exited yet.
    public var isRunning: Bool { exit.termination == nil }

    /// How the child ended; nil while it runs.
    public var termination: Termination? { exit.termination }

    /// Sends SIGTERM (a graceful stop), unless the child has already exited.
    public func terminate() { exit.signal(processIdentifier, SIGTERM) }

    /// Sends SIGKILL (no graceful stop), unless the child has already exited.
    public func kill() { exit.signal(processIdentifier, SIGKILL) }

    /// Waits until the child exits, without blocking a thread of the caller's.
    public func wait() async -> Termination {
        await withCheckedContinuation { continuation in exit.onExit { continuation.resume(returning: $0) } }
    }

    /// Blocks the calling thread until the child exits; from async code use ``wait()``.
    public func waitUntilExit() -> Termination {
        let exited = DispatchSemaphore(value: 0)
        exit.onExit { _ in exited.signal() }
        exited.wait()
        return exit.termination!
    }

    /// Writes `text` (UTF-8) to the child's standard input, blocking while the pipe is full.
    ///
    /// - Throws: ``Failure`` without an input pipe (``Input/pipe``), after ``closeInput()``, or when the write
    ///   fails. As with any pipe, writing after the child closed its end raises SIGPIPE.
    public func writeInput(_ text: String) throws {
        try input.withLock { writeEnd in
            guard let writeEnd else { throw Failure(description: "the standard input of \(processIdentifier) is not an open pipe") }
            var bytes = Array(text.utf8)[...]
            while !bytes.isEmpty {
                let written = bytes.withUnsafeBytes { write(writeEnd, $0.baseAddress, $0.count) }
                if written < 0 && errno == EINTR { continue }
                guard written >= 0 else { throw Failure(description: "cannot write to \(processIdentifier): \(Self.message(errno))") }
                bytes = bytes.dropFirst(written)
            }
        }
    }

    /// Closes the child's standard input: it reads end of file once it has read what was written.
    public func closeInput() {
        input.withLock { writeEnd in
            if let writeEnd { close(writeEnd) }
            writeEnd = nil
        }
    }
}

/// A child's exit, recorded by the thread that waits for it.
private final class Exit: Sendable {
    private struct State {
        var termination: ChildProcess.Termination?
        var waiters: [@Sendable (ChildProcess.Termination) -> Void] = []
    }

    private let state = Mutex(State())

    var termination: ChildProcess.Termination? { state.withLock { $0.termination } }

    /// Waits for `pid` to exit (blocking the calling thread), reaps it and tells the waiters.
    func reap(_ pid: pid_t) {
        var info = siginfo_t()
        // Wait without reaping: until `waitpid` below, which runs under the lock, the id stays this child's.
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == -1 && errno == EINTR {}
        let (termination, waiters) = state.withLock { state in
            var status: Int32 = 0
            var reaped: pid_t
            repeat { reaped = waitpid(pid, &status, 0) } while reaped == -1 && errno == EINTR
            let termination = reaped == pid ? ChildProcess.Termination(waitStatus: status) : .exited(-1)
            state.termination = termination
            defer { state.waiters = [] }
            return (termination, state.waiters)
        }
        for waiter in waiters { waiter(termination) }
    }

    /// Sends `signal` to `pid` unless it has been reaped.
    func signal(_ pid: pid_t, _ signal: Int32) {
        state.withLock { state in
            if state.termination == nil { _ = kill(pid, signal) }
        }
    }

    /// Calls `waiter` once the child has exited: at once if it has.
    func onExit(_ waiter: @escaping @Sendable (ChildProcess.Termination) -> Void) {
        let ended: ChildProcess.Termination? = state.withLock { state in
            if state.termination == nil { state.waiters.append(waiter) }
            return state.termination
        }
        if let ended { waiter(ended) }
    }
}
