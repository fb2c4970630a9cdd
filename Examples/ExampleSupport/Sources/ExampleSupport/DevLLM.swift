import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A real `tally-dev dev-llm` as a child process: the local OpenAI-compatible model an example's `ai:` section calls in
/// its tests and local runs. Its answers are deterministic and say what it saw of each image ("I see a 480×640
/// JPEG."); its `usage` counts each image's tokens from the image's header by OpenAI's tile rule (`--image-rule
/// patches`: 32-px patches), as a provider would bill them, so the server's holds and charges are the real ones.
///
/// It wants a key, as a provider does: the server must send it from the variable its `ai.upstream.apiKeyEnv` names
/// (``environment``), and its `ai.upstream.baseURL` must name this process (``pointUpstream(of:)``):
/// `DevAppStore.startWithServer(config:directory:certificates:subscriptions:devLLM:)` does both.
public final class DevLLM: @unchecked Sendable {
    /// Its OpenAI base URL, `http://127.0.0.1:<port>/v1`: what `ai.upstream.baseURL` names.
    public let baseURL: URL
    /// What the server's environment needs to call it: the variable of `ai.upstream.apiKeyEnv` set to the key this
    /// process wants.
    public let environment: [String: String]
    private let process: ChildProcess

    /// What `GET /dev/stats` reports: what it was asked since it started.
    public struct Stats: Decodable, Sendable, Hashable {
        /// Completion requests that carried the key (answered or not).
        public var completions: Int
        /// Requests refused for a missing or wrong key.
        public var unauthorized: Int
    }

    /// Starts `tally-dev dev-llm` on a free port, wanting a new random key which the server reads from `apiKeyEnv` (the
    /// config's `ai.upstream.apiKeyEnv`), billing images by `imageRule` (`tiles` or `patches`); returns once it
    /// answers. Its output goes into `directory`.
    public init(directory: URL, apiKeyEnv: String, imageRule: String = "tiles") async throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        environment = [apiKeyEnv: "sk-dev-\(UUID().uuidString.lowercased())"]
        process = try ChildProcess(
            try TallyServer.devBinary, ["dev-llm", "--port", "0", "--api-key-env", apiKeyEnv, "--image-rule", imageRule],
            environment: environment, output: directory.appendingPathComponent("dev-llm-\(UUID().uuidString.prefix(8)).out"))
        baseURL = try await process.awaitOutput("tally-dev dev-llm") { text in
            let prefix = "tally dev-llm listening on "
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return nil }
            return URL(string: String(line.dropFirst(prefix.count)))
        }
        let (_, response) = try await URLSession.shared.data(from: root.appendingPathComponent("health"))
        guard (response as? HTTPURLResponse)?.statusCode == 200 else { throw ExampleError("tally-dev dev-llm's /health answered \(response)") }
    }

    /// Stops it (SIGTERM) and waits for it.
    public func stop() async throws {
        process.signal()
        _ = try await process.wait()
    }

    /// What it was asked so far (`GET /dev/stats`): a call the server refused before calling it does not count.
    public func stats() async throws -> Stats {
        let (data, response) = try await URLSession.shared.data(from: root.appendingPathComponent("dev/stats"))
        guard (response as? HTTPURLResponse)?.statusCode == 200 else { throw ExampleError("tally-dev dev-llm's /dev/stats answered \(response)") }
        return try JSONDecoder().decode(Stats.self, from: data)
    }

    /// `config`'s text with its `ai:` section's `baseURL:` line (the upstream's, written as a block:
    /// `upstream:` then `baseURL:` on a line of its own) set to this process; throws when it has no such section or line.
    public func pointUpstream(of config: String) throws -> String {
        guard let pointed = try ConfigLines.set("baseURL", inSection: "ai", to: baseURL.absoluteString, of: config) else {
            throw ExampleError("the config has no ai: section to point at tally-dev dev-llm")
        }
        return pointed
    }

    /// Its root (the base URL without `/v1`), where `/health` and `/dev/…` are.
    private var root: URL { baseURL.deletingLastPathComponent() }
}
