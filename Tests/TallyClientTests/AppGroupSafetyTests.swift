import Foundation
import GRDB
import TallyAPI
@testable import TallyClient
import TallyTestKit
import TallyTestSupport
import Testing

/// An app and its widget sharing an App Group container: iOS kills a process suspended while it holds a lock on a file
/// there (`0xDEAD10CC`). The session's locked refresh lets go of its lock when the system expires its activity, and
/// the SDK's databases in such a container take no lock while the app is in the background.
@Suite("App Group safety", .timeLimit(.minutes(1)))
struct AppGroupSafetyTests {
    @Test("A path is in an App Group container on iOS and macOS, and nowhere else")
    func sharedContainers() {
        let shared = [
            "/private/var/mobile/Containers/Shared/AppGroup/6A1F0D2C-9B8E-4C1A-A3F7-2E5D8B9C0A11/Tally/u.sqlite",
            "/Users/ada/Library/Group Containers/group.com.example.astro/Tally/cache.sqlite",
        ]
        let own = [
            "/var/mobile/Containers/Data/Application/5B2E/Library/Application Support/Tally/u.sqlite",
            "/tmp/Shared/u.sqlite", "/tmp/AppGroup/Shared/u.sqlite", "/home/ada/Group/Containers/x.sqlite",
        ]
        for path in shared { #expect(PrivateDatabaseFile.isInSharedContainer(path), "\(path)") }
        for path in own { #expect(!PrivateDatabaseFile.isInSharedContainer(path), "\(path)") }
    }

    @Test("An activity's expiry runs each handler once, and one added after it at once")
    func expiry() {
        let activity = ExpiringActivity()
        let calls = Locked(0)
        activity.onExpiry { calls.withLock { $0 += 1 } }
        #expect(!activity.isExpired && calls.withLock { $0 } == 0)
        activity.expire()
        activity.expire()
        #expect(activity.isExpired && calls.withLock { $0 } == 1)
        activity.onExpiry { calls.withLock { $0 += 10 } }
        #expect(calls.withLock { $0 } == 11)
        activity.end()
    }

    @Test("A sign-in holds the shared lock file while its request is out, unless the system expires its activity")
    func lockLetGoAtExpiry() async throws {
        try await TallyTestServer.with(.sqlite) { server in
            for expires in [false, true] {
                let directory = FileManager.default.temporaryDirectory.appendingPathComponent("appgroup-" + UUID().uuidString)
                defer { try? FileManager.default.removeItem(at: directory) }
                let store = try FileSecureStore(directory: directory)
                let lockFile = try #require(store.lockFile)
                let clock = ManualClock()
                let transport = FaultInjectingTransport(wrapping: URLSessionTransport(baseURL: server.baseURL), clock: clock)
                let session = SessionManager(
                    secureStore: store, clock: clock,
                    executor: RequestExecutor(
                        transport: transport, clock: clock, retry: .none, timeouts: Timeouts(), metrics: ClientMetrics(exportLabel: nil),
                        random: { 0 }),
                    reachability: Reachability(clock: clock), userChanged: { _, _ in },
                    activities: { _ in
                        let activity = ExpiringActivity()
                        if expires { activity.expire() }  // the system says at once that the process is about to be suspended
                        return activity
                    })
                // The sign-in's answer is held on the clock: its locked section is in flight.
                transport.enqueue([.delayResponse(5)], forPathPrefix: "/v1/auth/guest")
                let signIn = Task { try await session.signInAsGuest() }
                try await clock.waitForSleepers(1)
                let took = Locked(false)
                let sibling = Task {
                    let lock = try await FileLock.acquire(lockFile)
                    took.withLock { $0 = true }
                    return lock
                }
                if expires {
                    // Let go at the expiry: the widget's process takes the lock while the request is still out.
                    let lock = try await sibling.value
                    lock.release()
                    clock.advance(by: 5)
                    #expect(try await signIn.value.isGuest)
                } else {
                    #expect(await eventually(yields: 5_000) { took.withLock { $0 } } == false, "the sibling waits for the sign-in")
                    clock.advance(by: 5)
                    _ = try await signIn.value
                    let lock = try await sibling.value  // only once the sign-in let go
                    lock.release()
                }
                #expect(try store.read("session") != nil, "the session was stored either way")
            }
        }
    }

    @Test("A database in an App Group container refuses writes while the app is in the background, and takes them again once active")
    func suspendedInBackground() async throws {
        try await TallyTestServer.with(.sqlite) { server in
            let root = FileManager.default.temporaryDirectory.appendingPathComponent("suspend-" + UUID().uuidString)
            defer { try? FileManager.default.removeItem(at: root) }
            let shared = root.appendingPathComponent("Containers/Shared/AppGroup/6A1F0D2C/Tally", isDirectory: true)
            let own = root.appendingPathComponent("Library/Caches", isDirectory: true)
            let sharedStore = try SQLiteCacheStore(path: shared.appendingPathComponent("cache.sqlite").path)
            let ownStore = try SQLiteCacheStore(path: own.appendingPathComponent("cache.sqlite").path)
            #expect(sharedStore.isShared && !ownStore.isShared)
            let (client, _) = server.client(cacheStore: sharedStore)
            let (other, _) = server.client(cacheStore: ownStore)
            #expect(client.sharesDatabases && !other.sharesDatabases)
            let entry = PersistedEntry(key: "k", data: Data("{}".utf8), etag: nil, confirmedAt: Date(timeIntervalSince1970: 1_800_000_000))

            client.appDidEnterBackground()
            #expect(throws: (any Error).self, "suspended: no lock taken") { try sharedStore.save(entry, userId: "u1") }
            try ownStore.save(entry, userId: "u1")  // a database of the app's own container is never suspended
            client.appDidBecomeActive()
            try sharedStore.save(entry, userId: "u1")
            #expect(try sharedStore.entries(userId: "u1").map(\.key) == ["k"])
        }
    }
}
