import Foundation
import TallyAPI
import Testing

@testable import TallyClient

/// `client.ai.stream` against stand-ins for the gateway: events as each piece arrives, the wallet from the hold
/// to the charge, every ending, and a reader that leaves closing the request.
@Suite("AI streams", .timeLimit(.minutes(1)))
struct AIClientStreamTests {
    static let charge = AICharge(charged: 7, held: 20, promptTokens: 12, completionTokens: 5, wallet: Wallet(balance: 93, held: 0, version: 4))

    /// Iterates a stream in a task of its own, handing each event to the test as it comes.
    struct Reader {
        let task: Task<Void, any Error>
        var events: AsyncStream<AIStreamEvent>.Iterator

        init(_ stream: AIStream) {
            let (events, sink) = AsyncStream.makeStream(of: AIStreamEvent.self)
            task = Task {
                defer { sink.finish() }
                for try await event in stream { sink.yield(event) }
            }
            self.events = events.makeAsyncIterator()
        }

        mutating func next() async -> AIStreamEvent? { await events.next() }

        /// The error the iteration ended with, if any.
        func failure() async -> (any Error)? {
            if case .failure(let error) = await task.result { return error }
            return nil
        }
    }

    @Test("Each chunk is handed on as it arrives; the hold shows from the start and the charge's wallet replaces it")
    func chunkByChunk() async throws {
        let (client, server, streams) = try await AIStubs.client()
        var connections = streams.connections.makeAsyncIterator()
        var reader = Reader(client.ai.stream(model: "chat", messages: AIStubs.ask("Hi"), estimate: 20))
        let connection = try #require(await connections.next())
        let during = client.state(client.walletQuery)
        #expect(during.value?.held == 20 && during.value?.available == 80 && during.pendingMutations == 1)

        connection.data(AIStubs.chunk(nil))  // the role: nothing to show
        connection.data(AIStubs.chunk("Hel"))
        #expect(await reader.next() == AIStreamEvent(content: "Hel"))  // while the response is still open
        let split = "data: \(AIStubs.chunk("lo"))\n\n"
        connection.send(String(split.prefix(11)))
        connection.send(String(split.dropFirst(11)))
        #expect(await reader.next() == AIStreamEvent(content: "lo"))
        connection.data(AIStubs.chunk("", finish: "stop"))
        connection.data("[DONE]")
        #expect(await reader.next() == AIStreamEvent(finishReason: "stop"))
        connection.send(AIStubs.chargeEvent(Self.charge))
        #expect(await reader.next() == AIStreamEvent(charge: Self.charge))
        let charged = client.state(client.walletQuery)  // confirmed before the app is told
        #expect(charged.value == Self.charge.wallet && charged.pendingMutations == 0 && !charged.isStale)
        connection.end()
        #expect(await reader.next() == nil)
        #expect(await reader.failure() == nil)

        let request = try #require(streams.requests.first)
        #expect(request.method == "POST" && request.path == AIGatewayProtocol.chatCompletionsPath)
        #expect(request.headers["Authorization"]?.hasPrefix("Bearer access-") == true && request.headers["Accept"] == "text/event-stream")
        let sent = try TallyJSON.decoder().decode(ChatCompletionRequest.self, from: try #require(request.body))
        #expect(sent.stream == true && sent.model == "chat" && sent.messages == AIStubs.ask("Hi"))
        #expect(server.requests(to: "/v1/wallet").count == 1)  // the charge's wallet: no refetch
        #expect(streams.terminations == ["finished"])
    }

    /// Issue 43: everything working for a user who leaves ends before the next user's work starts, AI streams included.
    @Test("Signing out ends a stream in flight before it returns: its request cancelled, its reader told unauthorized after the text it had")
    func signOutEndsTheStream() async throws {
        let (client, _, streams) = try await AIStubs.client()
        var connections = streams.connections.makeAsyncIterator()
        var reader = Reader(client.ai.stream(model: "chat", messages: AIStubs.ask("Hi"), estimate: 20))
        let connection = try #require(await connections.next())
        connection.data(AIStubs.chunk("Hel"))
        #expect(await reader.next() == AIStreamEvent(content: "Hel"))

        try await client.signOut()
        #expect(client.aiStreams.count == 0, "no call of the user who left is running")
        #expect(streams.terminations == ["cancelled"], "its request is cancelled when sign-out returns")
        connection.end()  // (before the fix, the reader would wait for the rest of the answer)
        #expect(await reader.next() == nil)
        let failure = await reader.failure()
        #expect((failure as? ClientError)?.code == .unauthorized, "\(String(describing: failure))")
        #expect(client.state(client.walletQuery).value == nil, "nothing of the user who left is shown")
    }

    @Test("A failure after the 200 hands on the text and the charge, then throws the gateway's error with the wallet")
    func failureAfterTheAnswerBegan() async throws {
        let (client, _, streams) = try await AIStubs.client()
        var connections = streams.connections.makeAsyncIterator()
        var reader = Reader(client.ai.stream(model: "chat", messages: AIStubs.ask("Hi")))
        let connection = try #require(await connections.next())
        connection.data(AIStubs.chunk("Once"))
        connection.data(AIStubs.json(ChatErrorBody(message: "The model's stream failed.", type: "upstream_error", code: "upstream_failed")))
        connection.send(AIStubs.chargeEvent(Self.charge))
        connection.end()
        #expect(await reader.next() == AIStreamEvent(content: "Once"))
        #expect(await reader.next() == AIStreamEvent(charge: Self.charge))
        #expect(await reader.next() == nil)
        let error = try #require(await reader.failure() as? ClientError)
        #expect(error.code == .server && error.serverCode == .upstreamFailed && error.wallet == Self.charge.wallet)
        #expect(client.value(client.walletQuery) == Self.charge.wallet)
    }

    @Test("A connection lost mid-answer throws offline; the estimate goes and the wallet is marked for a refetch")
    func cutMidAnswer() async throws {
        for ending in [TransportError.connectionLost, nil] {
            let (client, _, streams) = try await AIStubs.client()
            var connections = streams.connections.makeAsyncIterator()
            var reader = Reader(client.ai.stream(model: "chat", messages: AIStubs.ask("Hi"), estimate: 20))
            let connection = try #require(await connections.next())
            connection.data(AIStubs.chunk("Once"))
            #expect(await reader.next() == AIStreamEvent(content: "Once"))
            connection.end(ending)
            #expect(await reader.next() == nil)
            #expect((await reader.failure() as? ClientError)?.code == .offline)
            let after = client.state(client.walletQuery)
            #expect(after.value == Wallet(balance: 100, held: 0, version: 1) && after.pendingMutations == 0 && after.isStale)
        }
    }

    @Test("Cancelling the reading task cancels the request; the estimate goes")
    func cancelled() async throws {
        let (client, _, streams) = try await AIStubs.client()
        var connections = streams.connections.makeAsyncIterator()
        var reader = Reader(client.ai.stream(model: "chat", messages: AIStubs.ask("Hi"), estimate: 20))
        let connection = try #require(await connections.next())
        connection.data(AIStubs.chunk("Once"))
        #expect(await reader.next() == AIStreamEvent(content: "Once"))
        reader.task.cancel()
        #expect(await reader.failure() is CancellationError)
        #expect(await streams.waitForTerminations(1) == ["cancelled"])
        let after = client.state(client.walletQuery)
        #expect(after.value?.held == 0 && after.pendingMutations == 0)
    }

    @Test("Leaving the loop early lets go of the request and settles the hold")
    func leftEarly() async throws {
        let (client, _, streams) = try await AIStubs.client()
        let first = Task { () async throws -> AIStreamEvent? in
            for try await event in client.ai.stream(model: "chat", messages: AIStubs.ask("Hi"), estimate: 20) { return event }
            return nil
        }
        var connections = streams.connections.makeAsyncIterator()
        let connection = try #require(await connections.next())
        connection.data(AIStubs.chunk("Once"))
        #expect(try await first.value == AIStreamEvent(content: "Once"))
        #expect(await streams.waitForTerminations(1) == ["cancelled"])
        let after = client.state(client.walletQuery)
        #expect(after.value?.held == 0 && after.pendingMutations == 0)
    }

    @Test("A refusal before the answer throws from the first event; a 402's wallet is confirmed")
    func refused() async throws {
        let (client, _, streams) = try await AIStubs.client()
        let poor = Wallet(balance: 3, held: 0, version: 9)
        streams.enqueue([.status(AIStubServer.error(402, .insufficientTokens, wallet: poor))])
        var iterator = client.ai.stream(model: "chat", messages: AIStubs.ask("Hi"), estimate: 20).makeAsyncIterator()
        let refusal = await #expect(throws: ClientError.self) { _ = try await iterator.next() }
        #expect(refusal?.code == .insufficientTokens && refusal?.wallet == poor)
        #expect(try await iterator.next() == nil)
        let after = client.state(client.walletQuery)
        #expect(after.value == poor && after.pendingMutations == 0)

        streams.enqueue([.status(AIStubServer.error(404, .unknownModel))])
        let unknown = await #expect(throws: ClientError.self) {
            for try await _ in client.ai.stream(model: "nope", messages: AIStubs.ask("Hi")) {}
        }
        #expect(unknown?.serverCode == .unknownModel && unknown?.status == 404)
    }

    @Test("Only what never reached the server is sent again: no route is retried, a connection lost is not")
    func retries() async throws {
        let (client, _, streams) = try await AIStubs.client()
        streams.enqueue([.fail(.connectionLost)])
        let lost = await #expect(throws: ClientError.self) {
            for try await _ in client.ai.stream(model: "chat", messages: AIStubs.ask("Hi")) {}
        }
        #expect(lost?.code == .offline)
        #expect(streams.requests.count == 1)

        streams.enqueue([.fail(.offline)])
        var connections = streams.connections.makeAsyncIterator()
        var reader = Reader(client.ai.stream(model: "chat", messages: AIStubs.ask("Hi")))
        let connection = try #require(await connections.next())
        connection.data(AIStubs.chunk("Hi"))
        #expect(await reader.next() == AIStreamEvent(content: "Hi"))
        #expect(streams.requests.count == 3)
        connection.end()
    }

    @Test("A 401 refreshes the session once and opens again with the new token")
    func refreshesOn401() async throws {
        let (client, server, streams) = try await AIStubs.client()
        streams.enqueue([.status(AIStubServer.error(401, .unauthorized))])
        var connections = streams.connections.makeAsyncIterator()
        var reader = Reader(client.ai.stream(model: "chat", messages: AIStubs.ask("Hi")))
        let connection = try #require(await connections.next())
        connection.data(AIStubs.chunk("Hi"))
        #expect(await reader.next() == AIStreamEvent(content: "Hi"))
        connection.end()
        #expect(server.requests(to: "/v1/auth/refresh").count == 1)
        let tokens = streams.requests.map { $0.headers["Authorization"] }
        #expect(tokens.count == 2 && tokens[0] != tokens[1])
    }

    @Test("A double-tapped send streams once: both iterations read the whole answer, one request, one hold, one charge")
    func doubleTapJoins() async throws {
        let (client, _, streams) = try await AIStubs.client()
        var connections = streams.connections.makeAsyncIterator()
        let stream = client.ai.stream(model: "chat", messages: AIStubs.ask("Hi"), estimate: 20)
        var first = Reader(stream)
        let connection = try #require(await connections.next())
        connection.data(AIStubs.chunk("Hel"))
        #expect(await first.next() == AIStreamEvent(content: "Hel"))
        // The second tap, after the first chunk: it joins and reads the answer from its start.
        var second = Reader(client.ai.stream(model: "chat", messages: AIStubs.ask("Hi"), estimate: 20))
        #expect(await second.next() == AIStreamEvent(content: "Hel"))
        let during = client.state(client.walletQuery)
        #expect(during.value?.held == 20 && during.pendingMutations == 1)  // one hold shown, not two
        connection.data(AIStubs.chunk("lo", finish: "stop"))
        connection.data("[DONE]")
        connection.send(AIStubs.chargeEvent(Self.charge))
        connection.end()
        for reader in [first, second] {
            var reader = reader
            #expect(await reader.next() == AIStreamEvent(content: "lo", finishReason: "stop"))
            #expect(await reader.next() == AIStreamEvent(charge: Self.charge))
            #expect(await reader.next() == nil)
            #expect(await reader.failure() == nil)
        }
        #expect(streams.requests.count == 1)
        #expect(client.value(client.walletQuery) == Self.charge.wallet)
        #expect(await streams.waitForTerminations(1) == ["finished"])

        // Once it has ended, the same request is a new call, not a replay.
        var again = Reader(client.ai.stream(model: "chat", messages: AIStubs.ask("Hi")))
        let next = try #require(await connections.next())
        next.data(AIStubs.chunk("New"))
        #expect(await again.next() == AIStreamEvent(content: "New"))
        #expect(streams.requests.count == 2)
        next.end()
    }

    @Test("Another intent is another call; one reader of a shared call leaving does not stop the other's answer")
    func intentsAndLeaving() async throws {
        let (client, _, streams) = try await AIStubs.client()
        var connections = streams.connections.makeAsyncIterator()
        var first = Reader(client.ai.stream(model: "chat", messages: AIStubs.ask("Hi"), intent: "message-1"))
        let one = try #require(await connections.next())
        var other = Reader(client.ai.stream(model: "chat", messages: AIStubs.ask("Hi"), intent: "message-2"))
        let two = try #require(await connections.next())
        #expect(streams.requests.count == 2)
        two.end()
        _ = await other.next()

        var joined = Reader(client.ai.stream(model: "chat", messages: AIStubs.ask("Hi"), intent: "message-1"))
        one.data(AIStubs.chunk("Once"))
        #expect(await first.next() == AIStreamEvent(content: "Once"))
        #expect(await joined.next() == AIStreamEvent(content: "Once"))
        first.task.cancel()  // the first screen goes away
        #expect(await first.failure() is CancellationError)
        one.data(AIStubs.chunk(" more"))
        #expect(await joined.next() == AIStreamEvent(content: " more"))  // the call goes on for the other
        #expect(streams.terminations.count == 1)  // only message-2's connection ended
        joined.task.cancel()  // the last reader leaves: the request is cancelled
        #expect(await joined.failure() is CancellationError)
        #expect(await streams.waitForTerminations(2).last == "cancelled")
        let after = client.state(client.walletQuery)
        #expect(after.value?.held == 0 && after.pendingMutations == 0)
    }
}
