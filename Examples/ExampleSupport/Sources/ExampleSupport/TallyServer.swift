import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A real `tally serve` (SQLite in `dataDirectory`, the example's `TALLY_CONFIG`) as a child process: what the
/// example apps' tests talk to. The binary is `TALLY_BIN` (which the repository's `scripts/test` exports); the local
/// stand-ins run `tally-dev` (``devBinary``).
public final class TallyServer: @unchecked Sendable {
    /// The API's base URL.
    public let baseURL: URL
    /// The admin listener's base URL.
    public let adminURL: URL
    /// The admin key.
    public let adminKey = "example-admin-key-0123456789abcdef"
    private let process: ChildProcess

    /// The `tally` binary: `TALLY_BIN`.
    public static var binary: String {
        get throws {
            guard let path = ProcessInfo.processInfo.environment["TALLY_BIN"], FileManager.default.isExecutableFile(atPath: path) else {
                throw ExampleError("set TALLY_BIN to a built tally (swift build --product tally in the repository's root)")
            }
            return path
        }
    }

    /// The `tally-dev` binary (the local App Store and model: ``DevAppStore``, ``DevLLM``): `TALLY_DEV_BIN`, else
    /// `tally-dev` beside `TALLY_BIN` (where `swift build` puts both).
    public static var devBinary: String {
        get throws {
            let environment = ProcessInfo.processInfo.environment
            var path = environment["TALLY_DEV_BIN"] ?? ""
            if path.isEmpty { path = URL(fileURLWithPath: try binary).deletingLastPathComponent().appendingPathComponent("tally-dev").path }
            guard FileManager.default.isExecutableFile(atPath: path) else {
                throw ExampleError("set TALLY_DEV_BIN to a built tally-dev (swift build --product tally-dev in the repository's root)")
            }
            return path
        }
    }

    /// Starts `tally serve` on `port` (0: a free one) with `config` and `dataDirectory`, `environment` added to its
    /// own (an upstream's key: ``DevLLM/environment``); returns once it listens.
    public init(config: URL, dataDirectory: URL, port: Int = 0, environment: [String: String] = [:]) async throws {
        try FileManager.default.createDirectory(at: dataDirectory, withIntermediateDirectories: true)
        let output = dataDirectory.appendingPathComponent("serve-\(UUID().uuidString.prefix(8)).out")
        process = try ChildProcess(
            try Self.binary, ["serve", "--port", "\(port)", "--admin-port", "0", "--data-dir", dataDirectory.path],
            environment: environment.merging(["TALLY_CONFIG": config.path, "TALLY_ADMIN_KEY": adminKey, "LOG_LEVEL": "warning"]) { $1 },
            output: output)
        (baseURL, adminURL) = try await process.awaitOutput("tally serve") { text in
            var api: URL?
            var admin: URL?
            for line in text.split(separator: "\n") {
                let words = line.split(separator: " ")
                if line.hasPrefix("tally listening on "), words.count > 3 { api = URL(string: String(words[3])) }
                if line.hasPrefix("tally admin listening on "), words.count > 4 { admin = URL(string: String(words[4])) }
            }
            guard let api, let admin else { return nil }
            return (api, admin)
        }
    }

    /// The port the API listens on (to start the server again on the same one).
    public var port: Int { baseURL.port ?? 0 }

    /// Stops the server (SIGTERM) and waits for it.
    public func stop() async throws {
        process.signal()
        _ = try await process.wait()
    }

    /// Grants `amount` tokens to `userId` through the admin API (a purchase, as the app's backend would record it).
    public func grant(_ amount: Int, to userId: String) async throws {
        var request = URLRequest(url: adminURL.appendingPathComponent("admin/v1/users/\(userId)/grants"))
        request.httpMethod = "POST"
        request.setValue("Bearer \(adminKey)", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue(UUID().uuidString, forHTTPHeaderField: "Idempotency-Key")
        request.httpBody = Data(#"{"amount":\#(amount),"reason":"purchase"}"#.utf8)
        let (_, response) = try await URLSession.shared.data(for: request)
        guard (response as? HTTPURLResponse)?.statusCode == 201 else { throw ExampleError("grant answered \(response)") }
    }
}
