import Foundation
import Synchronization
import TallyAPI
import TallyLoad
import TallyTestSupport
import Testing

@testable import TallyClient

/// An app process killed at each point of a push — before the push leaves, right after it left, after the server
/// applied it but before the answer arrived — then launched again: each mutation ends on the server exactly once.
/// The app is a real child process (`tally-dev sdk-sync-probe`) with its session in a `FileSecureStore` and its
/// documents on disk; a proxy between it and the real server kills it (SIGKILL) at the chosen point.
@Suite("Push crash points: a killed app applies each mutation exactly once", .timeLimit(.minutes(2)))
struct PushCrashTests {
    static let writes = 40

    @Test(arguments: StoreKind.allCases, CrashingProxy.CrashPoint.allCases)
    func killedAndRelaunched(kind: StoreKind, at point: CrashingProxy.CrashPoint) async throws {
        try await TallyTestServer.withSync(kind) { server in
            let root = FileManager.default.temporaryDirectory.appendingPathComponent("push-crash-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: root) }
            let (store, documents) = (root.appendingPathComponent("secrets"), root.appendingPathComponent("documents"))
            // The user signs in once; each launch of the app restores that session from the shared store.
            let (owner, _) = server.client(secureStore: try FileSecureStore(directory: store))
            try await owner.signInAsGuest()
            func launch(_ name: String, url: String, writes: Int = 0, wait: Bool = true) throws -> TallyProcess {
                try TallyProcess(
                    ["sdk-sync-probe", "--store", store.path, "--documents", documents.path, "--url", url, "--writes", "\(writes)"]
                        + (wait ? [] : ["--no-wait"]),
                    name: name, directory: root)
            }

            // Offline (nothing listens on port 1), the app writes 40 notes and is closed: they wait in its outbox.
            let offline = await (try launch("offline", url: "http://127.0.0.1:1", writes: Self.writes, wait: false)).finish()
            #expect(offline.status == .exited(0), "\(offline.output) \(offline.errors)")
            let written = try JSONDecoder().decode(ProbeReport.self, from: Data(offline.output.utf8))
            #expect(written.pendingMutations == Self.writes, "\(written)")

            // The next launch pushes them, and is killed at the crash point.
            let app = Mutex<TallyProcess?>(nil)
            let proxy = try await CrashingProxy(targetPort: server.port, crashAt: point) { app.withLock { $0?.kill() } }
            let first = try launch("crashed", url: "http://127.0.0.1:\(proxy.port)")
            app.withLock { $0 = first }
            let death = await first.finish()
            await proxy.stop()
            #expect(proxy.crashed, "the push never reached the proxy: \(death.errors)")
            #expect(death.status == .signalled(SIGKILL), "\(death.status) \(death.output) \(death.errors)")
            let before = try await owner.pull(cursor: nil, limit: 1_000)
            switch point {
            case .beforeSend: #expect(before.changes.isEmpty, "a push killed before it left reached the server")
            case .afterApplied: #expect(before.changes.count == Self.writes, "the push was not applied before its answer was lost")
            case .afterSend: break  // the server may or may not have taken it: both must end the same way
            }

            // The launch after finds the outbox on disk and pushes what is left, straight to the server.
            let finished = await (try launch("relaunched", url: server.baseURL.absoluteString)).finish()
            #expect(finished.status == .exited(0), "\(finished.output) \(finished.errors)")
            let report = try JSONDecoder().decode(ProbeReport.self, from: Data(finished.output.utf8))
            let expected = (1...Self.writes).map { "n\($0)" }.sorted()
            #expect(report.pendingMutations == 0 && report.documents == expected, "\(report)")

            // Exactly once: every note once, with its text, and the user's versions 1…40 each taken by one of them
            // (a mutation applied twice would have taken a version of its own).
            let state = try await owner.pull(cursor: nil, limit: 1_000)
            #expect(state.changes.map(\.id).sorted() == expected)
            #expect(state.changes.map(\.version).sorted() == (1...Int64(Self.writes)).map { $0 })
            #expect(state.lastMutationIds.values.sorted() == [Int64(Self.writes)], "\(state.lastMutationIds)")
            for change in state.changes {
                #expect(change.data["text"] == .string("note \(change.id.dropFirst())"), "\(change.id): \(change.data)")
            }
        }
    }

    /// What `tally-dev sdk-sync-probe` prints when its outbox is empty.
    struct ProbeReport: Decodable {
        var pendingMutations: Int
        var documents: [String]
    }
}
