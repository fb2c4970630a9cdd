import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle
import TallyDevLLM
import UnixSignals

/// `tally-dev dev-llm`: a local OpenAI-compatible model for development and tests (``buildDevLLM(configuration:logger:onServerRunning:)``).
struct DevLLM: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev-llm", abstract: "Run a local OpenAI-compatible model with deterministic answers (development and tests).")

    @Option(help: "Address to bind.") var host = "127.0.0.1"
    @Option(help: "Port to bind (0 picks a free one).") var port = 8091
    @Option(name: .customLong("api-key-env"), help: "Environment variable holding the key requests must carry (unset: any).")
    var apiKeyEnv: String?
    @Option(name: .customLong("first-token-ms"), help: "Milliseconds before the first token.") var firstTokenMillis = 0
    @Option(name: .customLong("token-interval-ms"), help: "Milliseconds between tokens.") var tokenIntervalMillis = 0
    @Option(
        name: .customLong("image-rule"),
        help: "How image parts are billed: tiles (OpenAI's GPT-4o family: 85 + 170 a 512-px tile) or patches (32-px patches, GPT-4.1-mini's).")
    var imageRule = "tiles"

    func run() async throws {
        var configuration = DevLLMConfiguration()
        configuration.host = host
        configuration.port = port
        if let apiKeyEnv {
            guard let key = ProcessInfo.processInfo.environment[apiKeyEnv], !key.isEmpty else {
                throw ValidationError("\(apiKeyEnv) is not set")
            }
            configuration.apiKey = key
        }
        configuration.firstTokenDelay = .milliseconds(firstTokenMillis)
        configuration.tokenInterval = .milliseconds(tokenIntervalMillis)
        guard let images = DevLLMConfiguration.imageRules[imageRule] else {
            throw ValidationError("--image-rule is one of \(DevLLMConfiguration.imageRules.keys.sorted().joined(separator: ", "))")
        }
        configuration.images = images
        var logger = Logger(label: "tally.dev-llm")
        logger.logLevel = .warning
        let host = host
        let app = buildDevLLM(configuration: configuration, logger: logger) { port in
            FileHandle.standardOutput.write(Data("tally dev-llm listening on http://\(host):\(port)/v1\n".utf8))
        }
        try await ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)).run()
    }
}
