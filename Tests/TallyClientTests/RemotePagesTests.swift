import Foundation
import TallyAPI
import TallyStore
import Testing

@testable import TallyClient

/// The SDK's direct calls to the sync protocol against the real server: push, pull, and the remote range pages
/// for histories too long to keep on the device.
@Suite("Sync requests and remote pages", .timeLimit(.minutes(1)))
struct RemotePagesTests {
    static let chat = CollectionSpec(name: "chat_messages", rangeKey: "sentAt")

    @Test("remotePages walks a collection's range in pages, newest first, with only the fields asked, each document once")
    func pagesOfAHistory() async throws {
        try await TallyTestServer.with(configure: { $0.sync.collections = [Self.chat] }) { server in
            let (client, _) = server.client()
            _ = try await client.signInAsGuest()
            let clientId = "remote-pages-client-0001"
            let messages = (0..<45).map { n in
                SyncMutation(
                    id: Int64(n + 1), op: .put, collection: "chat_messages", docId: String(format: "m%03d", n),
                    data: .object(["sentAt": .string(String(format: "2027-01-01T00:%02d:00Z", n)), "text": .string("message \(n)"),
                        "role": .string(n % 2 == 0 ? "user" : "assistant")]))
            }
            let pushed = try await client.push(clientId: clientId, mutations: messages)
            #expect(pushed.lastMutationId == 45 && pushed.results.allSatisfy { $0.status == .applied })
            // The same batch again: nothing applies twice.
            let again = try await client.push(clientId: clientId, mutations: messages)
            #expect(again.lastMutationId == 45 && again.results.allSatisfy { $0.status == .duplicate })

            var pages: [[Document]] = []
            for try await page in client.remotePages(
                "chat_messages", RemoteRange(from: "2027-01-01T00:05:00Z", descending: true, fields: ["text"], pageSize: 15))
            {
                pages.append(page)
            }
            #expect(pages.map(\.count) == [15, 15, 10])
            let ids = pages.flatMap { $0.map(\.id) }
            #expect(ids == (5..<45).reversed().map { String(format: "m%03d", $0) })
            #expect(pages.flatMap { $0 }.allSatisfy { $0.data.objectValue?.keys.sorted() == ["text"] })

            // A pull without a cursor restores everything; with its cursor, nothing is new.
            let all = try await client.pull(cursor: nil, limit: 1_000)
            #expect(all.changes.count == 45 && !all.hasMore && all.lastMutationIds[clientId] == 45)
            let none = try await client.pull(cursor: all.cursor, limit: 1_000)
            #expect(none.changes.isEmpty)
        }
    }

    @Test("A collection name or range bound with reserved characters is sent escaped, not as another path or parameter")
    func escaping() async throws {
        try await TallyTestServer.with(configure: { $0.sync.collections = [Self.chat] }) { server in
            let (client, _) = server.client()
            _ = try await client.signInAsGuest()
            var pages = client.remotePages("chat_messages", RemoteRange(from: "2027&limit=1000", to: "2028")).makeAsyncIterator()
            #expect(try await pages.next() == nil)
            await #expect(throws: ClientError.self) {
                var unknown = client.remotePages("chat_messages/../wallet").makeAsyncIterator()
                _ = try await unknown.next()
            }
        }
    }
}
