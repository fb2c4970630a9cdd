import ArgumentParser
import Foundation
import TallyClient

/// `tally-dev sdk-sync-probe` (hidden): one launch of an app that syncs a `notes` collection (range key `date`) — the
/// child process of the push crash tests (PushCrashTests), which kill it at a point of its push and launch it again.
/// It restores the session from a `FileSecureStore`, puts `--writes` notes (`n<from>`, `n<from+1>`, …) through
/// the SDK, waits until the outbox is empty (unless `--no-wait`), and prints one JSON line: the pending count and
/// the documents it shows. Exits 1 if the session cannot be restored.
struct SyncProbe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sdk-sync-probe", abstract: "Write synced notes and push them, for the push crash tests.", shouldDisplay: false)

    /// A note as the probe writes it.
    struct Note: Codable, Sendable {
        var date: String
        var text: String
    }

    /// What the probe prints once its outbox is empty.
    struct Report: Codable {
        var pendingMutations: Int
        var documents: [String]
    }

    @Option(help: "The FileSecureStore directory holding the session.") var store: String
    @Option(help: "The directory of the user's document file.") var documents: String
    @Option(help: "The server's base URL.") var url: String
    @Option(help: "Notes to put before waiting for the push.") var writes = 0
    @Option(help: "The number of the first note written.") var from = 1
    @Flag(help: "Exit once the notes are written (committed on the device), without waiting for the push.") var noWait = false

    func run() async throws {
        guard let baseURL = URL(string: url) else { throw ValidationError("--url is not a URL") }
        var configuration = ClientConfiguration(baseURL: baseURL, secureStore: try FileSecureStore(directory: URL(fileURLWithPath: store)))
        configuration.collections = [SyncedCollectionSpec("notes", rangeKey: "date")]
        configuration.documentsDirectory = URL(fileURLWithPath: documents)
        configuration.metrics = ClientMetrics(exportLabel: nil)
        configuration.timeZone = nil
        let client = Client(configuration: configuration)
        guard try await client.restore() != nil else { throw ValidationError("no session in \(store)") }
        let notes = client.collection("notes", of: Note.self)
        for number in from..<(from + writes) {
            try notes.put(id: "n\(number)", Note(date: "2027-01-\(String(format: "%02d", number % 28 + 1))", text: "note \(number)"))
        }
        if !noWait {
            for await status in client.syncStatusChanges where status.pendingMutations == 0 && status.lastSyncedAt != nil && !status.isSyncing {
                break
            }
        }
        let shown = try notes.documents(from: nil, to: nil, limit: 10_000).map(\.id).sorted()
        let report = Report(pendingMutations: client.syncStatus.pendingMutations, documents: shown)
        print(String(decoding: try JSONEncoder().encode(report), as: UTF8.self))
    }
}
