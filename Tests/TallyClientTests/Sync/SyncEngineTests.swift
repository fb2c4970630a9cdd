import Foundation
import TallyAPI
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

@testable import TallyClient

/// The sync engine behind ``SyncedCollection``, against the real in-process server: offline writes, a lost push
/// answer and a relaunch, conflicts and rejections rolled back and reported. Every wait is on the injected
/// clock or on the SDK's own streams.
@Suite("Sync engine: exactly once through outages and relaunches", .timeLimit(.minutes(2)))
struct SyncEngineTests {
    @Test("1,000 changes made offline are all on the server once the network returns, once each and in order", arguments: StoreKind.allCases)
    func offlineThousand(kind: StoreKind) async throws {
        try await TallyTestServer.withSync(kind) { server in
            let clock = ManualClock()
            try await server.withSyncedClient(clock: clock) { client, transport, _ in
                let notes = client.collection("notes", of: Note.self)

                transport.enqueue(Array(repeating: .offline, count: 100_000), forPathPrefix: "/v1/sync/")
                for n in 1...1_000 {
                    try notes.put(id: "n\(n % 100)", Note(date: "2027-01-\(String(format: "%02d", n % 28 + 1))", text: "v\(n)"))
                }
                // Every write shows at once, whatever the network.
                #expect(try notes.get(id: "n7")?.text == "v907")
                try await client.waitForSync { $0.isOffline && $0.pendingMutations == 1_000 }
                let pushesWhileOffline = transport.count(path: "/v1/sync/push")
                #expect(pushesWhileOffline >= 1)

                // The engine waits out its backoff on the clock, to try again by itself. The event stream
                // (`/v1/sync/events`, offline too) may be waiting out its reconnect backoff by then as well.
                try await clock.waitForSleepers(1)
                #expect((1...2).contains(clock.sleeperCount))
                transport.clearFaults()
                clock.advance(by: SyncSchedule.unreachableActive.maxDelay)
                try await client.waitUntilSynced()
                #expect(client.syncStatus.isOffline == false)
                // Batches of 100; the batch that failed first is resent unchanged, and it may have held only the
                // writes made before the loop woke.
                #expect((10...11).contains(transport.count(path: "/v1/sync/push") - pushesWhileOffline), "batches of 100")

                let server = try await server.serverState(of: client)
                #expect(server.lastMutationIds[try client.syncClientId] == 1_000)
                #expect(server.changes.count == 100)
                for document in server.changes {
                    // Each change took the user's next version in push order: the last write of nK is 900+K (n0: 1000),
                    // and a change applied twice or out of order would show another version or text.
                    let k = Int(document.id.dropFirst())!
                    let last = k == 0 ? 1_000 : 900 + k
                    #expect(document.version == Int64(last), "\(document.id)")
                    #expect(document.data["text"]?.stringValue == "v\(last)", "\(document.id)")
                }
                #expect(try notes.documents().allSatisfy { !$0.isPending })
            }
        }
    }

    @Test("A push applied by the server whose answer is lost is sent again by the next launch and applied once", arguments: StoreKind.allCases)
    func lostAnswerThenRelaunch(kind: StoreKind) async throws {
        try await TallyTestServer.withSync(kind) { server in
            let directory = SyncedClientFixture.directory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let secureStore = MemorySecureStore()
            let clock = ManualClock()
            let (first, transport, _) = server.syncedClient(directory: directory, clock: clock, secureStore: secureStore)
            try await first.signInAsGuest()
            try await first.waitUntilSynced()
            // The engine is held in a pull (its answer waits on the clock) while the three changes are written, so
            // that they leave in one push, whose answer is lost.
            transport.enqueue([.delayResponse(1)], forPathPrefix: "/v1/sync/pull")
            first.appDidBecomeActive()
            try await clock.waitForSleepers(1)
            // Every later push of this client fails too: it stands for a process that dies with the answer lost. Alive,
            // its event stream brings the server's `changed` for that push, and the retry it starts finds the push
            // taken and empties the outbox before the next launch reads it (under load, 3 to 9 runs in 20).
            transport.enqueue([.dropResponse] + Array(repeating: .offline, count: 1_000), forPathPrefix: "/v1/sync/push")
            let notes = first.collection("notes", of: Note.self)
            try notes.put(id: "n1", Note(date: "2027-01-01", text: "one"))
            try notes.patch(id: "n1", Note(date: "2027-01-01", text: "one", done: true))
            try notes.put(id: "n2", Note(date: "2027-01-02", text: "two"))
            clock.advance(by: 1)
            try await first.waitForSync { $0.isOffline }  // the answer was lost: the engine backs off on its clock
            #expect(first.syncStatus.pendingMutations == 3)
            let clientId = try first.syncClientId
            #expect(try await server.serverState(of: first).lastMutationIds[clientId] == 3, "the server applied the push")

            // The process dies here; the next launch opens the same file and finds the outbox.
            let (relaunched, again, _) = server.syncedClient(directory: directory, secureStore: secureStore)
            try await relaunched.restore()
            try await relaunched.waitUntilSynced()
            #expect(again.count(path: "/v1/sync/push") == 1, "the outbox was pushed again")
            #expect(try relaunched.syncClientId == clientId)

            let state = try await server.serverState(of: relaunched)
            #expect(state.lastMutationIds[clientId] == 3)
            #expect(state.changes.map(\.id).sorted() == ["n1", "n2"])
            let n1 = try #require(state.changes.first { $0.id == "n1" })
            #expect(n1.version == 2 && n1.data["done"] == .bool(true), "put then patch, each once")
            #expect(state.changes.first { $0.id == "n2" }?.version == 3)
            let local = try #require(try relaunched.collection("notes", of: Note.self).document(id: "n1"))
            #expect(local.value == Note(date: "2027-01-01", text: "one", done: true) && local.version == 2 && !local.isPending)
        }
    }

    @Test("A stale ifVersion rolls back exactly that change, reported once; the rest of the outbox applies", arguments: StoreKind.allCases)
    func conflictRollsBackThatChange(kind: StoreKind) async throws {
        try await TallyTestServer.withSync(kind) { server in
            try await server.withSyncedClient { client, _, _ in
                var events = client.syncEvents.makeAsyncIterator()
                let notes = client.collection("notes", of: Note.self)
                try notes.put(id: "n1", Note(date: "2027-01-01", text: "mine"))
                try await client.waitUntilSynced()
                #expect(try notes.document(id: "n1")?.version == 1)
                // Another device replaces it (version 2).
                let token = try await client.session.accessToken()
                let replaced = try await server.send(
                    "PUT", "/v1/collections/notes/docs/n1", token: token, json: #"{"data":{"date":"2027-01-01","text":"theirs"}}"#)
                #expect(replaced.status == 200)

                try notes.put(id: "n1", Note(date: "2027-01-01", text: "strict"), ifVersion: 1)
                try notes.put(id: "n2", Note(date: "2027-01-02", text: "other"))
                #expect(try notes.get(id: "n1")?.text == "strict")  // shown at once

                guard case .conflict(let collection, let id, let current)? = await events.next() else {
                    throw TestFailure("no conflict reported")
                }
                #expect(collection == "notes" && id == "n1" && current?.version == 2 && current?.data["text"] == .string("theirs"))
                try await client.waitUntilSynced()
                #expect(try notes.get(id: "n1")?.text == "theirs", "rolled back to the server's state")
                #expect(try notes.document(id: "n2").map { $0.value.text == "other" && !$0.isPending } == true)
                let state = try await server.serverState(of: client)
                #expect(state.changes.first { $0.id == "n1" }?.data["text"] == .string("theirs"))
                #expect(state.changes.first { $0.id == "n2" }?.version == 3)
            }
        }
    }

    @Test("A metered collection without tokens rejects the new document: rolled back and reported with the 402 code", arguments: StoreKind.allCases)
    func rejectionRollsBack(kind: StoreKind) async throws {
        try await TallyTestServer.withSync(kind) { server in
            try await server.withSyncedClient { client, _, _ in
                var events = client.syncEvents.makeAsyncIterator()
                let answers = client.collection("answers", of: Note.self)
                try answers.put(id: "a1", Note(date: "2027-01-01", text: "an answer"))
                try client.collection("notes", of: Note.self).put(id: "n1", Note(date: "2027-01-01", text: "free"))
                #expect(try answers.get(id: "a1") != nil)

                guard case .rejected(let collection, let id, let error)? = await events.next() else { throw TestFailure("no rejection reported") }
                #expect(collection == "answers" && id == "a1" && error.code == .insufficientTokens)
                try await client.waitUntilSynced()
                #expect(try answers.get(id: "a1") == nil, "rolled back")
                let state = try await server.serverState(of: client)
                #expect(state.changes.map(\.id) == ["n1"])
            }
        }
    }

    @Test("A 410 resync_required on a pull starts over from no cursor; the documents stay, none doubled", arguments: StoreKind.allCases)
    func resyncAfterGone(kind: StoreKind) async throws {
        try await TallyTestServer.withSync(kind) { server in
            try await server.withSyncedClient { client, transport, _ in
                let notes = client.collection("notes", of: Note.self)
                try notes.put(id: "n1", Note(date: "2027-01-01", text: "one"))
                try await client.waitUntilSynced()
                transport.enqueue([.status(410, retryAfter: nil)], forPathPrefix: "/v1/sync/pull")
                let pullsBefore = transport.requests.filter { $0.path.hasPrefix("/v1/sync/pull") }.count

                try notes.put(id: "n2", Note(date: "2027-01-02", text: "two"))
                try await client.waitUntilSynced()
                let pulls = transport.requests.filter { $0.path.hasPrefix("/v1/sync/pull") }.dropFirst(pullsBefore).map(\.path)
                try #require(pulls.count >= 2)  // a `changed` event may ask for one more
                #expect(pulls[0].contains("cursor="), "the refused pull had a cursor")
                #expect(!pulls[1].contains("cursor="), "then from nothing")
                #expect(try notes.documents().map(\.id) == ["n1", "n2"])
                #expect(try notes.documents().allSatisfy { !$0.isPending })
            }
        }
    }
}
