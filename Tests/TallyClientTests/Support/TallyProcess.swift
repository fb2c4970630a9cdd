import Foundation
import TallyLoad
import TallyTestSupport

/// A child process running the built `tally-dev` binary (the SDK probes), with standard input to write to and its output kept in files.
final class TallyProcess: Sendable {
    private let process: ChildProcess
    private let output: URL
    private let errors: URL

    /// Starts `tally-dev arguments…`; its output goes to files named after `name` in `directory`.
    init(_ arguments: [String], name: String, directory: URL) throws {
        output = directory.appendingPathComponent("\(name).out")
        errors = directory.appendingPathComponent("\(name).err")
        process = try ChildProcess(
            TallyBinary.devPath, arguments: arguments, environment: ProcessInfo.processInfo.environment, standardInput: .pipe,
            standardOutput: .file(output), standardError: .file(errors))
    }

    /// Writes `line` and a newline to the process's standard input.
    func send(_ line: String) throws { try process.writeInput(line + "\n") }

    /// Waits for the process to exit (terminating it if the test is cancelled); its status, output and error output.
    func finish() async -> (status: ChildProcess.Termination, output: String, errors: String) {
        let status = await withTaskCancellationHandler {
            await process.wait()
        } onCancel: {
            process.terminate()
        }
        let read = { (url: URL) in (try? String(contentsOf: url, encoding: .utf8)) ?? "" }
        return (status, read(output), read(errors))
    }

    /// Stops the process if it still runs.
    func terminate() { process.terminate() }

    /// Kills the process (SIGKILL): it gets no chance to finish anything, as when iOS kills an app.
    func kill() { process.kill() }
}
