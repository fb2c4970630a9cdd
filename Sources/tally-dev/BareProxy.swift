import ArgumentParser
import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle
import UnixSignals

/// `tally-dev bare-proxy`: Hummingbird and AsyncHTTPClient relaying `POST /v1/chat/completions` to an upstream and
/// nothing else — no authentication, no parse, no hold —, built as Tally's gateway is (the body read whole into one
/// buffer, one pooled client, the answer streamed back as it arrives). `scripts/bench-ai`'s peers section measures it
/// beside Tally: what the stack costs a call before any of Tally's own work.
struct BareProxy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bare-proxy", abstract: "Relay chat completions to an upstream with Hummingbird and AsyncHTTPClient alone (a benchmark's baseline).")

    @Option(help: "Port to bind on 127.0.0.1 (0 picks a free one).") var port = 0
    @Option(help: "The upstream's base URL, e.g. http://127.0.0.1:8091.") var upstream: String

    func run() async throws {
        var configuration = HTTPClient.Configuration(timeout: .init(connect: .seconds(10), read: .seconds(120)))
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 4_096)
        configuration.decompression = .disabled
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let url = upstream + "/v1/chat/completions"
        let router = Router()
        router.post("/v1/chat/completions") { request, _ -> Response in
            var body = ByteBufferAllocator().buffer(capacity: request.headers[.contentLength].flatMap { Int($0) } ?? 0)
            for try await var chunk in request.body { body.writeBuffer(&chunk) }
            var outbound = HTTPClientRequest(url: url)
            outbound.method = .POST
            outbound.headers.add(name: "Content-Type", value: "application/json")
            if let authorization = request.headers[.authorization] { outbound.headers.add(name: "Authorization", value: authorization) }
            outbound.body = .bytes(body)
            let answer = try await client.execute(outbound, timeout: .seconds(120))
            var headers = HTTPFields()
            headers[.contentType] = answer.headers.first(name: "Content-Type") ?? "application/json"
            return Response(
                status: .init(code: Int(answer.status.code)), headers: headers,
                body: ResponseBody { writer in
                    for try await piece in answer.body { try await writer.write(piece) }
                    try await writer.finish(nil)
                })
        }
        var logger = Logger(label: "tally.bare-proxy")
        logger.logLevel = .warning
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: "tally-bare-proxy"),
            onServerRunning: { channel in
                FileHandle.standardOutput.write(Data("bare-proxy listening on port \(channel.localAddress?.port ?? 0)\n".utf8))
            }, logger: logger)
        do {
            try await ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)).run()
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }
}
