import Foundation
import TallyAPI
import TallyStore
import TallyTestSupport
import Testing

@testable import TallyClient

/// One event stream per signed-in, active app, whatever it configured, against the real in-process server: an app
/// without synced collections sees a grant and a premium change on an open observer at once; the stream closes in
/// the background (the server's `tally_event_streams` gauge) and reopens with catch-up at activation.
@Suite("Live events for every signed-in app", .timeLimit(.minutes(2)))
struct LiveEventsTests {
    @Test("An app with no collections sees an admin grant and a premium change on open observers within 1 s, without a request", arguments: StoreKind.allCases)
    func grantAndPremiumWithoutCollections(kind: StoreKind) async throws {
        try await TallyTestServer.with(kind) { server in
            let events = FaultInjectingEventStreamTransport(wrapping: URLSessionEventStreamTransport(baseURL: server.baseURL))
            let (client, transport) = server.client(eventStream: true) { $0.eventStreamTransport = events }
            let signedOut = await #expect(throws: ClientError.self) { try await client.sync.now() }
            #expect(signedOut?.code == .unauthorized)
            let user = try await client.signInAsGuest()
            try await client.sync.now()  // nothing to sync without collections: it returns at once
            var wallets = client.observe(client.walletQuery).makeAsyncIterator()
            var profiles = client.observe(client.meQuery).makeAsyncIterator()
            var start: Wallet?
            while start == nil, let state = await wallets.next() { start = state.value }
            var profile: Me?
            while profile == nil, let state = await profiles.next() { profile = state.value }
            #expect(profile?.premiumUntil == nil)
            let available = try #require(start).available
            try await waitUntil { String(decoding: events.received, as: UTF8.self).contains("event: wallet") }
            let requests = transport.requests.count

            // A grant on the admin listener. Measured from the admin call's answer (the change is committed by then; its
            // event may even come first): under a loaded test run the call itself can take a second.
            let grantCall = ContinuousClock.now
            try await server.grant(25, to: user.userId)
            let grant = ContinuousClock.now
            var granted: QueryState<Wallet>?
            while granted?.value?.available != available + 25, let state = await wallets.next() { granted = state }
            let grantShown = ContinuousClock.now - grant
            #expect(grantShown <= .seconds(1), "\(grantShown) after the call's answer (the call took \(grant - grantCall))")
            #expect(granted?.isStale == false, "confirmed from the event")

            // Premium, then its revocation.
            let until = Date(timeIntervalSince1970: 1_800_000_000 + 30 * 86_400)
            try await server.setPremium(until: until, for: user.userId)
            let premium = ContinuousClock.now
            while let state = await profiles.next(), state.value?.premiumUntil != until {}
            let premiumShown = ContinuousClock.now - premium
            #expect(premiumShown <= .seconds(1), "\(premiumShown)")
            #expect(try await client.premiumStatus() == PremiumStatus(isActive: true, until: until))
            try await server.setPremium(until: nil, for: user.userId)
            let revoked = ContinuousClock.now
            while let state = await profiles.next(), state.value?.premiumUntil != nil {}
            let revocationShown = ContinuousClock.now - revoked
            #expect(revocationShown <= .seconds(1), "\(revocationShown)")
            #expect(try await client.premiumStatus().isActive == false)
            print("LiveEventsTests[\(kind)]: grant shown \(grantShown), premium \(premiumShown), revocation \(revocationShown) after the admin call answered (the grant call took \(grant - grantCall))")

            #expect(transport.requests.count == requests, "no refetch: \(transport.requests.dropFirst(requests).map(\.path))")
            #expect(events.requests.count == 1, "one stream")
        }
    }

    @Test("In the background the stream closes; at activation it reopens from the pull cursor and catches up", arguments: StoreKind.allCases)
    func backgroundClosesActivationCatchesUp(kind: StoreKind) async throws {
        try await TallyTestServer.withSync(kind) { server in
            let directory = SyncedClientFixture.directory()
            defer { try? FileManager.default.removeItem(at: directory) }
            let (client, transport, events) = server.syncedClient(directory: directory)
            let user = try await client.signInAsGuest()
            try await client.waitUntilSynced()
            try await waitUntil { String(decoding: events.received, as: UTF8.self).contains("event: wallet") }
            #expect(try await server.openEventStreams() == 1)
            let notes = client.collection("notes", of: Note.self)
            try notes.put(id: "mine", Note(date: "2027-01-01", text: "before"))
            try await client.waitUntilSynced()
            let cursor = try #require(try client.syncHost.engine().cursor)

            client.appDidEnterBackground()
            try await server.waitUntilNoEventStreams()

            // Meanwhile: a grant, and another device's note.
            try await server.grant(40, to: user.userId)
            let token = try await client.session.accessToken()
            let put = try await server.send(
                "PUT", "/v1/collections/notes/docs/theirs", token: token, json: #"{"data":{"date":"2027-01-02","text":"from the tablet"}}"#)
            #expect(put.status == 201)
            let walletBefore = try #require(client.value(client.walletQuery))
            let opens = events.requests.count
            #expect(await !eventually(yields: 10_000) { client.value(client.walletQuery) != walletBefore }, "no live event in the background")
            #expect(try notes.get(id: "theirs") == nil)

            let walletReads = transport.count(path: "/v1/wallet")
            var wallets = client.observe(client.walletQuery).makeAsyncIterator()
            var theirs = notes.observe(id: "theirs").makeAsyncIterator()
            client.appDidBecomeActive()
            while let state = await wallets.next(), state.value?.available != walletBefore.available + 40 {}
            while let note = await theirs.next(), note == nil {}
            #expect(events.requests.count == opens + 1)
            #expect(events.requests.last?.headers["Last-Event-ID"] == cursor, "resumed from the pull cursor")
            #expect(try await server.openEventStreams() == 1)
            #expect(transport.count(path: "/v1/wallet") == walletReads, "the wallet came on the stream")
        }
    }
}
