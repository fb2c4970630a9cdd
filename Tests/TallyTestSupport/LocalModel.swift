import Logging
import ServiceLifecycle
import TallyAPI
import TallyDevLLM

/// `tally-dev dev-llm` in the test process: the AI gateway's upstream in the server's and the SDK's tests.
public enum LocalModel {
    /// Runs `body` with a local model on a free loopback port (handed to `body`) that wants `apiKey`, writes a token
    /// every `tokenInterval` and bills images by `images` (nil: its default, OpenAI's tiles), then shuts it down.
    public static func with<T: Sendable>(
        apiKey: String, tokenInterval: Duration = .zero, images: AIImageRule? = nil, _ body: @Sendable (_ port: Int) async throws -> T
    ) async throws -> T {
        var configuration = DevLLMConfiguration()
        configuration.port = 0
        configuration.apiKey = apiKey
        configuration.tokenInterval = tokenInterval
        if let images { configuration.images = images }
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = buildDevLLM(configuration: configuration, logger: Logger(label: "dev-llm-test")) { continuation.yield($0) }
        return try await withThrowingTaskGroup(of: Void.self) { group in
            let services = ServiceGroup(configuration: .init(services: [app], logger: Logger(label: "dev-llm-test")))
            group.addTask { try await services.run() }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CancellationError() }
            defer { Task { await services.triggerGracefulShutdown() } }
            return try await body(port)
        }
    }
}
