import Foundation
import TallyTestSupport

/// A child process running the built `tally` binary, with standard input to write to and its output kept in files.
final class TallyProcess: @unchecked Sendable {
    private let process = Process()
    private let input = Pipe()
    private let output: URL
    private let errors: URL

    /// Starts `tally arguments…`; its output goes to files named after `name` in `directory`.
    init(_ arguments: [String], name: String, directory: URL) throws {
        output = directory.appendingPathComponent("\(name).out")
        errors = directory.appendingPathComponent("\(name).err")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        process.executableURL = URL(fileURLWithPath: TallyBinary.path)
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = try FileHandle(forWritingTo: errors)
        try process.run()
    }

    /// Writes `line` and a newline to the process's standard input.
    func send(_ line: String) throws { try input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8)) }

    /// Waits for the process to exit (terminating it if the test is cancelled); its status, output and error output.
    func finish() async -> (status: Int32, output: String, errors: String) {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async {
                    self.process.waitUntilExit()
                    continuation.resume()
                }
            }
        } onCancel: {
            self.process.terminate()
        }
        let read = { (url: URL) in (try? String(contentsOf: url, encoding: .utf8)) ?? "" }
        return (process.terminationStatus, read(output), read(errors))
    }

    /// Stops the process if it still runs.
    func terminate() {
        if process.isRunning { process.terminate() }
    }
}
