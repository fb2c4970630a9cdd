import Foundation
import TallyAPI
@testable import TallyClient
import TallyTestKit

/// A temporary directory holding one user's ``LocalDocumentStore`` file; `cleanUp()` removes it.
struct LocalStoreFixture {
    /// `habit_logs` ranges by `date`; `notes` has no range key.
    static let rangeKeys: [String: String?] = ["habit_logs": "date", "notes": nil]

    let directory: URL
    let path: URL
    let clock = ManualClock()

    init() {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("LocalStore-\(UUID().uuidString)")
        path = LocalDocumentStore.path(directory: directory, userId: "user-1")
    }

    /// Opens (another) store on the fixture's file.
    func open() throws -> LocalDocumentStore {
        try LocalDocumentStore(path: path.path, rangeKeys: Self.rangeKeys, clock: clock)
    }

    func cleanUp() { try? FileManager.default.removeItem(at: directory) }

    static func log(_ id: String) -> DocumentKey { DocumentKey(collection: "habit_logs", id: id) }

    static func logData(_ date: String, done: Bool) -> JSONValue {
        .object(["date": .string(date), "done": .bool(done)])
    }

    static func server(_ key: DocumentKey, _ data: JSONValue, version: Int64, deleted: Bool = false) -> Document {
        Document(id: key.id, collection: key.collection, data: deleted ? .object([:]) : data, version: version,
                 updatedAt: Date(timeIntervalSince1970: 1_800_000_000), deleted: deleted)
    }

    static func page(_ changes: [Document], cursor: String, hasMore: Bool = false, acknowledged: [String: Int64] = [:]) -> SyncPullResponse {
        SyncPullResponse(changes: changes, cursor: cursor, hasMore: hasMore, lastMutationIds: acknowledged)
    }
}
