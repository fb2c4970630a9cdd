import Foundation
import TallyAPI
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

@testable import TallyClient

/// Synced collections across a user's devices and processes, against the real in-process server and its real
/// event stream: concurrent field edits converge, a wallet change shows on the other device, a widget's write
/// shows in the app without the network, and sign-out leaves no document file.
@Suite("Synced collections across devices and processes", .timeLimit(.minutes(2)))
struct SyncedDevicesTests {
    @Test("Two devices of one user patch different fields of one document at once and both converge to both edits", arguments: StoreKind.allCases)
    func twoDevicesConverge(kind: StoreKind) async throws {
        try await TallyTestServer.withSync(kind) { server in
            let (phoneDirectory, tabletDirectory) = (SyncedClientFixture.directory(), SyncedClientFixture.directory())
            defer { for directory in [phoneDirectory, tabletDirectory] { try? FileManager.default.removeItem(at: directory) } }
            let secureStore = MemorySecureStore()  // one installation's guest: the same user on both
            let (phone, _, _) = server.syncedClient(directory: phoneDirectory, secureStore: secureStore)
            let (tablet, _, _) = server.syncedClient(directory: tabletDirectory, secureStore: secureStore)
            #expect(try await phone.signInAsGuest().userId == tablet.signInAsGuest().userId)
            try await phone.waitUntilSynced()
            try await tablet.waitUntilSynced()
            let onPhone = phone.collection("notes", of: Note.self)
            let onTablet = tablet.collection("notes", of: Note.self)
            #expect(try phone.syncClientId != tablet.syncClientId)

            let original = Note(date: "2027-01-01", text: "draft", done: false)
            try onPhone.put(id: "n1", original)
            _ = try await onTablet.observe(id: "n1").firstValue { $0 == original }  // the phone's push → `changed` → pull

            try onPhone.patch(id: "n1", Note(date: "2027-01-01", text: "final", done: false))
            try onTablet.patch(id: "n1", Note(date: "2027-01-01", text: "draft", done: true))
            let both = Note(date: "2027-01-01", text: "final", done: true)
            _ = try await onPhone.observe(id: "n1").firstValue { $0 == both }
            _ = try await onTablet.observe(id: "n1").firstValue { $0 == both }
            try await phone.waitUntilSynced()
            try await tablet.waitUntilSynced()
            #expect(try onPhone.document(id: "n1")?.version == onTablet.document(id: "n1")?.version)
            let state = try await server.serverState(of: phone)
            #expect(state.changes.first?.data == JSONValue.object(["date": .string("2027-01-01"), "text": .string("final"), "done": .bool(true)]))
        }
    }

    @Test("Keys spelt in NFC and in NFD stay two keys from one device through the server to the other, and a patch of one leaves the other", arguments: StoreKind.allCases)
    func unicodeKeysAcrossDevices(kind: StoreKind) async throws {
        try await TallyTestServer.withSync(kind) { server in
            let (phoneDirectory, tabletDirectory) = (SyncedClientFixture.directory(), SyncedClientFixture.directory())
            defer { for directory in [phoneDirectory, tabletDirectory] { try? FileManager.default.removeItem(at: directory) } }
            let secureStore = MemorySecureStore()
            let (phone, _, _) = server.syncedClient(directory: phoneDirectory, secureStore: secureStore)
            let (tablet, _, _) = server.syncedClient(directory: tabletDirectory, secureStore: secureStore)
            #expect(try await phone.signInAsGuest().userId == tablet.signInAsGuest().userId)
            try await phone.waitUntilSynced()
            try await tablet.waitUntilSynced()
            let (nfc, nfd) = (JSONKey("caf\u{E9}"), JSONKey("cafe\u{301}"))
            let onPhone = phone.collection("notes", of: JSONValue.self)
            let onTablet = tablet.collection("notes", of: JSONValue.self)
            let original = JSONValue.object(["date": .string("2027-01-01"), nfc: .int(1), nfd: .int(2)])
            try onPhone.put(id: "u1", original)
            _ = try await onTablet.observe(id: "u1").firstValue { $0 == original }
            let patched = JSONValue.object(["date": .string("2027-01-01"), nfc: .int(1), nfd: .int(3)])
            try onTablet.patch(id: "u1", patched)  // pushes the merge patch of the change: `nfd` alone
            _ = try await onPhone.observe(id: "u1").firstValue { $0 == patched }
            try await phone.waitUntilSynced()
            let state = try await server.serverState(of: phone)
            #expect(state.changes.first?.data == patched, "\(String(describing: state.changes.first?.data))")
        }
    }

    @Test("A wallet change made through one device shows in the other's cached wallet, from the event stream alone", arguments: StoreKind.allCases)
    func walletEventUpdatesTheOtherDevice(kind: StoreKind) async throws {
        try await TallyTestServer.withSync(kind) { server in
            let (phoneDirectory, tabletDirectory) = (SyncedClientFixture.directory(), SyncedClientFixture.directory())
            defer { for directory in [phoneDirectory, tabletDirectory] { try? FileManager.default.removeItem(at: directory) } }
            let secureStore = MemorySecureStore()
            let (phone, _, _) = server.syncedClient(directory: phoneDirectory, secureStore: secureStore)
            let (tablet, tabletTransport, _) = server.syncedClient(directory: tabletDirectory, secureStore: secureStore)
            let user = try await phone.signInAsGuest()
            try await tablet.signInAsGuest()
            try await server.grant(10, to: user.userId)
            var wallets = tablet.observe(tablet.walletQuery).makeAsyncIterator()
            while let state = await wallets.next(), state.value?.available != 10 {}

            try await phone.perform("ai.query")  // 3 tokens
            while let state = await wallets.next(), state.value?.available != 7 {}
            #expect(tablet.value(tablet.walletQuery)?.available == 7)
            #expect(tablet.state(tablet.walletQuery).isStale == false, "confirmed as a server answer")
            #expect(tabletTransport.count(path: "/v1/wallet") <= 1, "at most the observer's first fetch: the change came on the stream")
        }
    }

    @Test("A widget's write to the shared file shows in the app at activation, without the network; the app then pushes it once", arguments: StoreKind.allCases)
    func widgetWriteSeenAtActivation(kind: StoreKind) async throws {
        try await TallyTestServer.withSync(kind) { server in
            let clock = ManualClock()
            try await server.withSyncedClient(clock: clock) { app, transport, directory in
                let user = try #require(await app.user)
                let notes = app.collection("notes", of: Note.self)
                var seen = notes.observe(id: "w1").makeAsyncIterator()
                #expect(await seen.next() == .some(nil))

                // The widget: its own store on the app's file (another process in production; see LocalDocumentStoreTests).
                let widget = try LocalDocumentStore(
                    path: LocalDocumentStore.path(directory: directory, userId: user.userId).path,
                    rangeKeys: ["notes": "date", "answers": nil])
                try widget.write(.put(DocumentKey(collection: "notes", id: "w1"), .object(["date": .string("2027-01-05"), "text": .string("from the widget")])))
                try widget.close()

                // Nothing the sign-in started is still on its way when the network goes: an answer to it coming after the push
                // was sent (the price list's background fetch, the event stream's first connection) would be a sign that the
                // server is back, on which the engine rightly pushes again at once.
                try await app.waitUntilQuiet()
                transport.enqueue(Array(repeating: .offline, count: 100_000), forPathPrefix: "/v1/")
                let requestsBefore = transport.requests.count
                app.appDidBecomeActive()
                #expect(try notes.get(id: "w1")?.text == "from the widget")
                #expect(await seen.next() == .some(Note(date: "2027-01-05", text: "from the widget")))
                try await app.waitForSync { $0.isOffline }
                let sent = transport.requests.dropFirst(requestsBefore).filter { $0.path.hasPrefix("/v1/sync/") }
                #expect(sent.map { "\($0.method) \($0.path)" } == ["POST /v1/sync/push"], "one failed push of the outbox, no other sync request")
                let push = try TallyJSON.decoder().decode(SyncPushRequest.self, from: try #require(sent.first?.body))
                #expect(push.mutations.map(\.docId) == ["w1"] && push.mutations.first?.op == .put, "the widget's write")

                try await clock.waitForSleepers(1)
                transport.clearFaults()
                clock.advance(by: SyncSchedule.unreachableActive.maxDelay)
                try await app.waitUntilSynced()
                let state = try await server.serverState(of: app)
                #expect(state.changes.map(\.id) == ["w1"] && state.changes.first?.version == 1)
                #expect(state.lastMutationIds[try app.syncClientId] == 1)
            }
        }
    }

    @Test("Sign-out removes the user's document file with its outbox, ends observations; synced calls then throw unauthorized", arguments: StoreKind.allCases)
    func signOutLeavesNoFile(kind: StoreKind) async throws {
        try await TallyTestServer.withSync(kind) { server in
            try await server.withSyncedClient { client, _, directory in
                let notes = client.collection("notes", of: Note.self)
                try notes.put(id: "n1", Note(date: "2027-01-01", text: "private"))
                #expect(!SyncedClientFixture.documentFiles(directory).isEmpty)
                var observed = notes.observe(id: "n1").makeAsyncIterator()
                #expect(await observed.next() == .some(Note(date: "2027-01-01", text: "private")))

                try await client.signOut(discardingPendingWrites: true)
                // The push's confirmation may have re-emitted the note before the sign-out: what is left ends, with nothing new.
                var leftovers: [Note?] = []
                while let value = await observed.next() {
                    leftovers.append(value)
                    if leftovers.count > 3 { break }
                }
                #expect(leftovers.count <= 3 && leftovers.allSatisfy { $0 == Note(date: "2027-01-01", text: "private") },
                    "observations end with the user: \(leftovers)")
                #expect(SyncedClientFixture.documentFiles(directory) == [], "the file is gone when sign-out returns")
                #expect(client.syncStatus == SyncStatus())
                #expect(throws: ClientError.self) { try notes.get(id: "n1") }
                do {
                    try notes.put(id: "n2", Note(date: "2027-01-02", text: "after"))
                    Issue.record("a write without a user succeeded")
                } catch let error as ClientError {
                    #expect(error.code == .unauthorized)
                }
            }
        }
    }
}
