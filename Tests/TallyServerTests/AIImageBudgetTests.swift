import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import TallyAPI
@testable import TallyServer
import Testing

/// The chat route's body budget (`ai.requestBytesInFlight`): the pure count, its reservations, and a real server whose
/// small budget answers a crowd of large uploads 503 `busy` before reading them.
@Suite("AI gateway: the chat body budget", .timeLimit(.minutes(3)))
struct AIImageBudgetTests {
    @Test("A budget takes reservations up to its capacity exactly, refuses beyond it without change, and takes again what is given back")
    func byteBudget() {
        var budget = ByteBudget(capacity: 100)
        #expect(budget.reserve(60) && budget.reserved == 60)
        #expect(!budget.reserve(41) && budget.reserved == 60, "one byte over: refused, nothing reserved")
        #expect(budget.reserve(40) && budget.reserved == 100, "exactly full")
        #expect(!budget.reserve(1) && budget.reserve(0))
        budget.release(60)
        #expect(budget.reserved == 40 && budget.reserve(60) && !budget.reserve(1))
        #expect(!budget.reserve(-1) && budget.reserved == 100, "a negative size is no reservation")
        budget.release(1_000)
        #expect(budget.reserved == 0, "never below zero")
        var empty = ByteBudget(capacity: 0)
        #expect(empty.reserve(0) && !empty.reserve(1))
        // A random walk against a model: reserved is always the sum of what is held, never above capacity.
        var generator = SplitMix64(seed: 44)
        var random = ByteBudget(capacity: 1_000)
        var held: [Int] = []
        for _ in 0..<10_000 {
            if generator.next() % 2 == 0, !held.isEmpty {
                random.release(held.removeLast())
            } else {
                let size = Int(generator.next() % 400)
                let fits = held.reduce(0, +) + size <= 1_000
                #expect(random.reserve(size) == fits)
                if fits { held.append(size) }
            }
            #expect(random.reserved == held.reduce(0, +) && random.reserved <= 1_000)
        }
    }

    static func request(contentLength: Int?) -> Request {
        var fields = HTTPFields()
        if let contentLength { fields[.contentLength] = "\(contentLength)" }
        return Request(
            head: HTTPRequest(method: .post, scheme: "http", authority: "x", path: "/v1/ai/chat/completions", headerFields: fields),
            body: .init(buffer: ByteBuffer()))
    }

    @Test("A reservation is the declared length (or the body limit without one), kept at what was read, given back once, also when dropped")
    func reservations() throws {
        let budget = RequestBodyBudget(maxBodyBytes: 1_000, bytesInFlight: 2_500)
        let first = try budget.reserve(for: Self.request(contentLength: 900))
        let unsized = try budget.reserve(for: Self.request(contentLength: nil))
        #expect(first.bytes == 900 && unsized.bytes == 1_000 && budget.reserved == 1_900)
        #expect {
            _ = try budget.reserve(for: Self.request(contentLength: 700))
        } throws: { error in
            guard let error = error as? APIError else { return false }
            return error.status.code == 503 && error.body.error.code == .busy && error.headers[HTTPField.Name("Retry-After")!] == "1"
        }
        #expect {
            _ = try budget.reserve(for: Self.request(contentLength: 1_001))
        } throws: { error in
            // Beyond the body limit: 413, not busy.
            (error as? APIError).map { $0.status == .contentTooLarge && $0.body.error.code == .bodyTooLarge } ?? false
        }
        #expect(budget.reserved == 1_900, "a refusal reserves nothing")
        unsized.keep(120)
        #expect(unsized.bytes == 120 && budget.reserved == 1_020, "a body read without a length is held at its size")
        unsized.keep(500)
        #expect(budget.reserved == 1_020, "keeping more than is held takes nothing")
        first.end()
        first.end()
        #expect(budget.reserved == 120 && first.bytes == 0, "given back once")
        do {
            let dropped = try budget.reserve(for: Self.request(contentLength: 1_000))
            #expect(budget.reserved == 1_120 && dropped.bytes == 1_000)
        }
        #expect(budget.reserved == 120, "a reservation dropped unended gives its bytes back")
        unsized.end()
        #expect(budget.reserved == 0)
    }

    /// A question whose body is about `bytes` long: a 64×64 PNG padded with zeros after its end.
    static func question(bytes: Int) -> String {
        let png = SyntheticImage.bytes(.png, width: 64, height: 64)
        let padding = max(0, (bytes - 300) * 3 / 4 - png.count)
        let url = SyntheticImage.dataURL(png + [UInt8](repeating: 0, count: padding), format: .png)
        return String(decoding: JSONValue.object(AIImageGatewayTests.question("vision", [AIImageGatewayTests.imagePart(url, detail: "low")])).bytes, as: UTF8.self)
    }

    static func head(_ user: TestUser, length: Int, close: Bool = false) -> String {
        "POST /v1/ai/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(user.accessToken)\r\n"
            + (close ? "Connection: close\r\n" : "") + "Content-Type: application/json\r\nContent-Length: \(length)\r\n\r\n"
    }

    @Test("A busy answer reaches a client that asks Connection: close and writes its whole 8 MiB upload before reading (as urllib does): no reset, no stall", arguments: StoreKind.allCases)
    func busyAnswerAfterAWholeUpload(_ kind: StoreKind) async throws {
        let size = 8 << 20
        try await AIImageGatewayTests.with(kind, maxRequestBytes: size, bytesInFlight: size) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 100_000)
            let budget = try #require(server.services.ai?.bodies)
            // One upload declares the whole budget and sends no more: every other upload is busy.
            let holder = try await RawConnection.open(port: server.port)
            try await holder.send(Self.head(user, length: size))
            for _ in 0..<2_000 where budget.reserved == 0 { try await Task.sleep(for: .milliseconds(5)) }
            #expect(budget.reserved == size)

            // 8 MiB is more than loopback's socket buffers hold: the write completes only if the server reads it.
            let upload = try await RawConnection.open(port: server.port)
            let sent = try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    try await upload.send(Self.head(user, length: size, close: true) + String(repeating: "x", count: size))
                    return true
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(60))
                    return false
                }
                defer { group.cancelAll() }
                return try await group.next() ?? false
            }
            #expect(sent, "the whole body was written")
            let answer = try #require(try await upload.response(within: .seconds(20)))
            #expect(answer.hasPrefix("HTTP/1.1 503") && answer.contains(#""code":"busy""#), "\(answer.prefix(300))")
            #expect(await upload.closedByServer(within: .seconds(20)), "closed once the body was read, as asked")
            await upload.close()
            await holder.close()
            #expect(upstream.requests == 0)
            #expect(try await api.allEntries(user).map(\.kind) == ["grant"], "nothing held for a busy answer")
        }
    }

    @Test("With a 1.5 MiB budget: while one 0.9 MiB upload is being read, concurrent large uploads get 503 busy + Retry-After, unread, nothing held; uploads within the budget succeed", arguments: StoreKind.allCases)
    func busy(_ kind: StoreKind) async throws {
        try await AIImageGatewayTests.with(kind, maxRequestBytes: 1 << 20, bytesInFlight: 3 << 19) { server, upstream in
            let api = server.connection()
            let user = try await api.newGuest(granted: 100_000)
            let budget = try #require(server.services.ai?.bodies)
            let body = Self.question(bytes: 900_000)
            #expect((880_000...900_000).contains(body.utf8.count), "\(body.utf8.count)")

            // The first upload sends its head and half its body, then waits: its length is reserved while it is read.
            let slow = try await RawConnection.open(port: server.port)
            try await slow.send(Self.head(user, length: body.utf8.count) + body.prefix(body.utf8.count / 2))
            for _ in 0..<2_000 where budget.reserved == 0 { try await Task.sleep(for: .milliseconds(5)) }
            #expect(budget.reserved == body.utf8.count)

            // Four more, all at once: none fits beside it. Each is answered 503 busy with Retry-After, its body unread.
            let answers = try await concurrently(4, server: server) { _, connection in
                try await connection.send(.post, "/v1/ai/chat/completions", token: user.accessToken, raw: body)
            }
            for answer in answers {
                #expect(answer.status == .serviceUnavailable && answer.errorCode == "busy" && answer.headers[.retryAfter] == "1", "\(answer.text)")
            }
            #expect(upstream.requests == 0 && budget.reserved == body.utf8.count)
            #expect(try await api.allEntries(user).map(\.kind) == ["grant"], "nothing was held for a busy answer")
            // A declared length beyond the body limit: 413 at once, nothing reserved.
            let tooLarge = try await RawConnection.open(port: server.port)
            try await tooLarge.send(Self.head(user, length: (1 << 20) + 1))
            let refused = try #require(try await tooLarge.response(within: .seconds(20)))
            #expect(refused.hasPrefix("HTTP/1.1 413") && refused.contains("body_too_large"), "\(refused)")
            await tooLarge.close()

            // The first upload ends: answered, and its reservation given back once its call ended.
            try await slow.send(String(body.dropFirst(body.utf8.count / 2)))
            let first = try #require(try await slow.response(within: .seconds(20)))
            #expect(first.hasPrefix("HTTP/1.1 200"), "\(first.prefix(300))")
            await slow.close()
            for _ in 0..<2_000 where budget.reserved != 0 { try await Task.sleep(for: .milliseconds(5)) }
            #expect(budget.reserved == 0)

            // Within the budget again: an upload succeeds.
            let alone = try await api.send(.post, "/v1/ai/chat/completions", token: user.accessToken, raw: body)
            #expect(alone.status == .ok, "\(alone.text)")
            #expect(upstream.requests == 2)
            let wallet = try await AIGatewayTests.settled(api, user)
            #expect(wallet.held == 0)
            try await api.expectBooksBalance(user)
        }
    }
}
