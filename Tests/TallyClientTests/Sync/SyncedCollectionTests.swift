import Foundation
import TallyAPI
import TallyTestKit
import TallyTestSupport
import Testing

@testable import TallyClient

/// The typed handle's reads and observations answer from the device: with the network gone, a write reaches
/// range observers and ``ObservedDocuments`` at once, and a patch sends only the changed fields.
@Suite("Synced collection: reads and observation from the device", .timeLimit(.minutes(2)))
struct SyncedCollectionTests {
    static func note(_ date: String, _ text: String) -> Note { Note(date: date, text: text) }

    @Test("Range reads and observations answer from the device, in range-key order, and follow local writes at once", arguments: StoreKind.allCases)
    func rangesFromTheDevice(kind: StoreKind) async throws {
        try await TallyTestServer.withSync(kind) { server in
            try await server.withSyncedClient { client, transport, _ in
                transport.enqueue(Array(repeating: .offline, count: 100_000), forPathPrefix: "/v1/")
                let notes = client.collection("notes", of: Note.self)
                try notes.put(id: "b", Self.note("2026-11-20", "b"))
                try notes.put(id: "a", Self.note("2026-11-02", "a"))
                try notes.put(id: "dec", Self.note("2026-12-01", "december"))
                let november = { try notes.documents(from: "2026-11-01", to: "2026-12-01").map(\.id) }
                #expect(try november() == ["a", "b"])
                #expect(try notes.documents(from: "2026-11-01", descending: true, limit: 2).map(\.id) == ["dec", "b"])

                var month = notes.observe(from: "2026-11-01", to: "2026-12-01").makeAsyncIterator()
                #expect(await month.next()?.map(\.id) == ["a", "b"])
                try notes.put(id: "dec2", Self.note("2026-12-02", "outside"))  // not in the range: nothing sent
                try notes.put(id: "c", Self.note("2026-11-10", "c"))
                let next = try #require(await month.next())
                #expect(next.map(\.id) == ["a", "c", "b"] && next.allSatisfy(\.isPending))
                try notes.delete(id: "a")
                #expect(await month.next()?.map(\.id) == ["c", "b"])
            }
        }
    }

    @Test("patch sends only the changed fields; an unchanged value writes nothing", arguments: StoreKind.allCases)
    func patchSendsTheDifference(kind: StoreKind) async throws {
        try await TallyTestServer.withSync(kind) { server in
            let clock = ManualClock()
            try await server.withSyncedClient(clock: clock) { client, transport, _ in
                transport.enqueue(Array(repeating: .offline, count: 100_000), forPathPrefix: "/v1/sync/")  // the outbox stays put
                let notes = client.collection("notes", of: Note.self)
                try notes.patch(id: "n1", Note(date: "2027-01-01", text: "draft", done: false))  // absent: a put
                try notes.patch(id: "n1", Note(date: "2027-01-01", text: "draft", done: true))
                try notes.patch(id: "n1", Note(date: "2027-01-01", text: "draft", done: true))  // nothing changed
                try notes.patch(id: "n1", Note(date: "2027-01-01", text: "draft"))  // `done` removed
                let outbox = try client.syncHost.engine().store.pendingMutations(limit: 10)
                #expect(outbox.map(\.op) == [.put, .patch, .patch])
                #expect(outbox[1].data == .object(["done": .bool(true)]))
                #expect(outbox[2].data == .object(["done": .null]))
                try await clock.waitForSleepers(1)
                transport.clearFaults()
                clock.advance(by: SyncSchedule.unreachableActive.maxDelay)
                try await client.waitUntilSynced()
                #expect(try await server.serverState(of: client).changes.first?.data
                    == .object(["date": .string("2027-01-01"), "text": .string("draft")]))
            }
        }
    }

    @available(iOS 17, macOS 14, tvOS 17, watchOS 10, *)
    @MainActor
    @Test("ObservedDocuments shows the range at init and follows a local write", arguments: StoreKind.allCases)
    func observedDocuments(kind: StoreKind) async throws {
        try await TallyTestServer.withSync(kind) { server in
            try await server.withSyncedClient { client, _, _ in
                let notes = client.collection("notes", of: Note.self)
                try notes.put(id: "a", Self.note("2026-11-02", "a"))
                let observed = await ObservedDocuments(notes, from: "2026-11-01", to: "2026-12-01")
                #expect(await observed.documents.map(\.id) == ["a"])
                let running = Task { await observed.run() }
                defer { running.cancel() }
                try notes.put(id: "b", Self.note("2026-11-03", "b"))
                #expect(await eventually(asking: { await observed.documents.map(\.id) == ["a", "b"] }))
            }
        }
    }
}
