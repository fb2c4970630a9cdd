import Foundation
import TallyLoad
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `ChildProcess`, the `posix_spawn` launcher that replaces Foundation's `Process` (whose `run()` crashes
/// intermittently on Linux), on real `/bin/sh` and `/bin/cat` children.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct ChildProcessTests {
    @Test("The exit status, standard output and standard error, each to its file or both to one")
    func statusAndOutput() async throws {
        try await Scratch.with { directory in
            let (out, err, both) = (directory.file("out"), directory.file("err"), directory.file("both"))
            let script = "echo out; echo err >&2; exit 3"
            let child = try ChildProcess("/bin/sh", arguments: ["-c", script], environment: [:], standardOutput: .file(out), standardError: .file(err))
            #expect(await child.wait() == .exited(3))
            #expect(child.termination == .exited(3) && !child.isRunning)
            #expect(try String(contentsOf: out, encoding: .utf8) == "out\n")
            #expect(try String(contentsOf: err, encoding: .utf8) == "err\n")

            let shared = try ChildProcess("/bin/sh", arguments: ["-c", script], environment: [:], standardOutput: .file(both), standardError: .file(both))
            #expect(shared.waitUntilExit() == .exited(3))
            #expect(try String(contentsOf: both, encoding: .utf8) == "out\nerr\n")
        }
    }

    @Test("The child gets exactly the environment given, none of this process's")
    func environmentIsExplicit() async throws {
        try await Scratch.with { directory in
            let out = directory.file("env")
            let child = try ChildProcess(
                "/bin/sh", arguments: ["-c", "env"], environment: ["GREETING": "hello world", "PATH": "/usr/bin:/bin"], standardOutput: .file(out))
            #expect(await child.wait() == .exited(0))
            let lines = try String(contentsOf: out, encoding: .utf8).split(separator: "\n").map(String.init)
            #expect(lines.contains("GREETING=hello world") && lines.contains("PATH=/usr/bin:/bin"))
            let names = Set(lines.compactMap { $0.split(separator: "=").first.map(String.init) })
            #expect(names.isSubset(of: ["GREETING", "PATH", "PWD"]), "\(names)")  // dash adds PWD itself
        }
    }

    @Test("Standard input: written through the pipe and ended by closeInput; /dev/null without a pipe")
    func standardInput() async throws {
        try await Scratch.with { directory in
            let out = directory.file("cat")
            let cat = try ChildProcess("/bin/cat", environment: [:], standardInput: .pipe, standardOutput: .file(out))
            try cat.writeInput("one\n")
            try cat.writeInput("two")
            #expect(cat.isRunning)  // it waits for more until its input ends
            cat.closeInput()
            #expect(await cat.wait() == .exited(0))
            #expect(try String(contentsOf: out, encoding: .utf8) == "one\ntwo")
            #expect(throws: ChildProcess.Failure.self) { try cat.writeInput("late") }

            let empty = directory.file("empty")
            let reader = try ChildProcess("/bin/sh", arguments: ["-c", "cat; echo done"], environment: [:], standardOutput: .file(empty))
            #expect(await reader.wait() == .exited(0))
            #expect(try String(contentsOf: empty, encoding: .utf8) == "done\n")
            #expect(throws: ChildProcess.Failure.self) { try reader.writeInput("no pipe") }
        }
    }

    @Test("terminate() sends SIGTERM, kill() SIGKILL; after the exit both do nothing")
    func terminateAndKill() async throws {
        let terminated = try ChildProcess("/bin/sleep", arguments: ["30"], environment: [:])
        #expect(terminated.isRunning && terminated.termination == nil)
        terminated.terminate()
        #expect(await terminated.wait() == .signalled(SIGTERM))

        // A child that ignores SIGTERM: only SIGKILL stops it.
        try await Scratch.with { directory in
            let out = directory.file("stubborn")
            let script = "trap '' TERM; echo ready; read line; echo \"still here\"; exec sleep 30"
            let stubborn = try ChildProcess("/bin/sh", arguments: ["-c", script], environment: [:], standardInput: .pipe, standardOutput: .file(out))
            try await Scratch.waitFor("ready\n", in: out)
            stubborn.terminate()
            try stubborn.writeInput("go\n")  // answered only if the SIGTERM (sent before) left it running
            try await Scratch.waitFor("ready\nstill here\n", in: out)
            #expect(stubborn.isRunning)
            stubborn.kill()
            #expect(await stubborn.wait() == .signalled(SIGKILL))
            stubborn.kill()
            stubborn.terminate()
            #expect(stubborn.waitUntilExit() == .signalled(SIGKILL))
        }
    }

    @Test("wait() holds no thread: with more waiters than the cooperative pool has threads, the task that ends the child still runs")
    func waitingHoldsNoThread() async throws {
        let cat = try ChildProcess("/bin/cat", environment: [:], standardInput: .pipe)
        // Should waiting hold threads, nothing would run the ending task: a thread outside the pool kills the child.
        let done = DispatchSemaphore(value: 0)
        Thread { if done.wait(timeout: .now() + 20) == .timedOut { cat.kill() } }.start()
        defer { done.signal() }
        let waiters = ProcessInfo.processInfo.activeProcessorCount * 4
        let ended = await withTaskGroup(of: ChildProcess.Termination.self) { group in
            for _ in 0..<waiters { group.addTask { await cat.wait() } }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(100))  // the waiters first
                cat.closeInput()
                return await cat.wait()
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(ended == Array(repeating: .exited(0), count: waiters + 1))
    }

    @Test("The child starts with no signal blocked or ignored, even when this process ignores one and the spawning thread blocks it")
    func signalsAreReset() async throws {
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGUSR2)
        var previousMask = sigset_t()
        pthread_sigmask(SIG_BLOCK, &blocked, &previousMask)
        let previousHandler = signal(SIGUSR2, SIG_IGN)  // nothing in this process uses SIGUSR2
        let child = Result { try ChildProcess("/bin/cat", environment: [:], standardInput: .pipe) }
        signal(SIGUSR2, previousHandler)
        pthread_sigmask(SIG_SETMASK, &previousMask, nil)
        let cat = try child.get()
        defer { cat.kill() }
        // Until the exec has finished, /proc shows the spawning thread's name and signals.
        var status = ""
        for _ in 0..<100 {
            status = try String(contentsOfFile: "/proc/\(cat.processIdentifier)/status", encoding: .utf8)
            if status.hasPrefix("Name:\tcat\n") { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        let masks = Dictionary(
            status.split(separator: "\n").compactMap { line -> (String, UInt64)? in
                let parts = line.split(separator: ":\t")
                return parts.count == 2 && parts[0].hasPrefix("Sig") ? (String(parts[0]), UInt64(parts[1], radix: 16) ?? .max) : nil
            }, uniquingKeysWith: { $1 })
        #expect(masks["SigBlk"] == 0, "\(status)")
        // Signals 1–31; glibc's posix_spawn leaves its own two (32 and 33) ignored, for the C library to take over.
        #expect(masks["SigIgn"].map { $0 & 0x7fff_ffff } == 0, "\(status)")
    }

    @Test("A missing executable throws a clear error and leaves no descriptor behind")
    func missingExecutable() async throws {
        let pipesBefore = OpenDescriptors.ofThisProcess().filter { $0.hasPrefix("pipe:") }
        for _ in 0..<50 {
            let error = #expect(throws: ChildProcess.Failure.self) {
                _ = try ChildProcess("/nonexistent/tally", environment: [:], standardInput: .pipe)
            }
            #expect(error?.description == "cannot start /nonexistent/tally: No such file or directory")
        }
        // A leak would leave at least one pipe end per failed start; other suites may open a pipe or two meanwhile.
        let leaked = OpenDescriptors.ofThisProcess().filter { $0.hasPrefix("pipe:") }.subtracting(pipesBefore)
        #expect(leaked.count < 10, "\(leaked)")
    }

    @Test("200 children started at once from 8 tasks: each has only its own three descriptors, gets its input and exits; none leaks")
    func manyAtOnce() async throws {
        try await Scratch.with { directory in
            // Phase 1: every child started and holding its input open, so each later start could inherit the
            // earlier children's pipes if they were not close-on-exec.
            let started = try await withThrowingTaskGroup(of: [(Int, ChildProcess, String)].self) { group in
                for task in 0..<8 {
                    group.addTask {
                        var children: [(Int, ChildProcess, String)] = []
                        for number in task * 25..<(task + 1) * 25 {
                            let cat = try ChildProcess(
                                "/bin/cat", environment: [:], standardInput: .pipe, standardOutput: .file(directory.file("cat-\(number)")))
                            try cat.writeInput("child \(number)\n")
                            children.append((number, cat, await OpenDescriptors.settled(of: cat.processIdentifier)))
                        }
                        return children
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(started.count == 200)
            var pipes: Set<String> = []
            for (number, _, descriptors) in started {
                #expect(descriptors.hasPrefix("0 1 2 |"), "child \(number) has \(descriptors)")
                pipes.insert(String(descriptors.split(separator: "|")[1].split(separator: " ")[0]))
            }
            #expect(pipes.count == 200 && pipes.allSatisfy { $0.hasPrefix("pipe:") }, "\(pipes.sorted().prefix(3))")

            // Phase 2: end every input; each child exits with its line written.
            let ended = await withTaskGroup(of: (Int, ChildProcess.Termination).self) { group in
                for (number, cat, _) in started {
                    group.addTask {
                        cat.closeInput()
                        return (number, await cat.wait())
                    }
                }
                return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
            #expect(ended.count == 200 && ended.values.allSatisfy { $0 == .exited(0) })
            for number in 0..<200 {
                #expect(try String(contentsOf: directory.file("cat-\(number)"), encoding: .utf8) == "child \(number)\n")
            }
            // No descriptor of this process still refers to a child's pipe or output file.
            let open = OpenDescriptors.ofThisProcess()
            #expect(open.isDisjoint(with: pipes), "\(open.intersection(pipes).count) input pipes left open")
            #expect(!open.contains { $0.hasPrefix(directory.path) }, "output files left open")
        }
    }
}

/// What the descriptors of a process refer to, from `/proc/<pid>/fd`.
enum OpenDescriptors {
    /// The targets of this process's descriptors (`pipe:[123]`, file paths…).
    static func ofThisProcess() -> Set<String> {
        let fd = "/proc/self/fd"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: fd)) ?? []
        return Set(names.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "\(fd)/\($0)") })
    }

    /// `"0 1 2 | <target of 0> <target of 1> <target of 2>"` for `pid`, once the listing is `0 1 2` (up to 2 s,
    /// while the child may still be opening files of its own as it starts), else the last listing.
    static func settled(of pid: pid_t) async -> String {
        var listing = ""
        for _ in 0..<40 {
            let fd = "/proc/\(pid)/fd"
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: fd)) ?? []).sorted { Int($0) ?? 0 < Int($1) ?? 0 }
            let targets = names.map { (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(fd)/\($0)")) ?? "?" }
            listing = names.joined(separator: " ") + " | " + targets.joined(separator: " ")
            if names == ["0", "1", "2"] { break }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return listing
    }
}

/// A scratch directory, removed afterwards.
enum Scratch {
    static func with<T>(_ body: (URL) async throws -> T) async throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        return try await body(directory)
    }

    /// Waits (up to 10 s) until `file` holds exactly `text`.
    static func waitFor(_ text: String, in file: URL) async throws {
        var tries = 0
        while (try? String(contentsOf: file, encoding: .utf8)) != text, tries < 500 {
            tries += 1
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try String(contentsOf: file, encoding: .utf8) == text)
    }
}

extension URL {
    fileprivate func file(_ name: String) -> URL { appendingPathComponent(name) }
}
