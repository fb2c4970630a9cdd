import Foundation
import TallyAPI
import TallyStore
import Testing

/// The steps both stores' document writers take per mutation (``DocumentTaking``) and the rule of a pull page
/// (``ChangePaging``), checked without a store: the conformance suites check the stores that call them.
@Suite("Document taking and change paging", .timeLimit(.minutes(1)))
struct DocumentTakingTests {
    private static let action = ActionSpec(name: "log.create", tokens: 2)
    private static let logs = CollectionSpec(name: "logs", maxDocuments: 2, action: action, quotaLimit: 3)
    private static let notes = CollectionSpec(name: "notes", maxDocuments: 1)
    private static let now = Date(timeIntervalSince1970: 1_800_000_000.123_456)

    private static func put(_ collection: CollectionSpec, _ id: String) throws -> DocumentMutation {
        DocumentMutation(collection: collection, docId: id, operation: .put(try JSONValue.parse(#"{"n":1}"#)))
    }

    private static func delete(_ collection: CollectionSpec, _ id: String) -> DocumentMutation {
        DocumentMutation(collection: collection, docId: id, operation: .delete)
    }

    private static func live(_ collection: CollectionSpec, _ id: String, version: Int64) -> DocumentRecord {
        DocumentRecord(
            collection: collection.name, id: id, data: Array(#"{"n":0}"#.utf8), rangeValue: nil, version: version,
            updatedAt: Date(timeIntervalSince1970: 0), deleted: false)
    }

    /// A call's writes from `version`, with `usage` stored within `budget` (the defaults: plenty).
    private static func taking(version: Int64, usage: SyncUsage = SyncUsage(), budget: SyncBudget = SyncBudget()) -> DocumentTaking {
        DocumentTaking(version: version, usage: usage, budget: budget, now: now)
    }

    /// The write `taking` plans for `mutation`; records an issue for an answer.
    private static func write(
        _ taking: DocumentTaking, _ mutation: DocumentMutation, existing: DocumentRecord? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> DocumentTaking.Write {
        guard case .write(let write) = taking.plan(mutation, existing: existing) else {
            Issue.record("expected a write", sourceLocation: sourceLocation)
            throw StoreError(.invalidInput)
        }
        return write
    }

    @Test("Each write taken is the user's next version, stamped with the call's time in whole milliseconds")
    func versionsFollowOneAnother() throws {
        var taking = Self.taking(version: 41)
        taking.counted("notes", 0, includesWritesTaken: false)
        let created = taking.take(try Self.write(taking, try Self.put(Self.notes, "a")))
        let removed = taking.take(try Self.write(taking, Self.delete(Self.notes, "b"), existing: Self.live(Self.notes, "b", version: 3)))
        #expect(created.version == 42 && removed.version == 43 && taking.version == 43)
        #expect(created == DocumentRecord(
            collection: "notes", id: "a", data: Array(#"{"n":1}"#.utf8), rangeValue: nil, version: 42,
            updatedAt: Date(millis: Self.now.millis), deleted: false))
        #expect(removed.deleted && removed.data.isEmpty && removed.updatedAt.millis == Self.now.millis)
    }

    @Test("Only a put on a document that is not live needs the collection counted, and only once per call")
    func countsOnlyForCreates() throws {
        var taking = Self.taking(version: 0)
        let stored = Self.live(Self.logs, "a", version: 1)
        let tombstone = DocumentRecord(
            collection: "logs", id: "t", data: [], rangeValue: nil, version: 2, updatedAt: Self.now, deleted: true)
        #expect(!taking.needsCount(try Self.put(Self.logs, "a"), existing: stored), "a replacement creates nothing")
        #expect(!taking.needsCount(Self.delete(Self.logs, "a"), existing: stored))
        #expect(!taking.needsCount(Self.delete(Self.logs, "x"), existing: nil), "refused whatever the count")
        #expect(taking.needsCount(try Self.put(Self.logs, "x"), existing: nil))
        #expect(taking.needsCount(try Self.put(Self.logs, "t"), existing: tombstone))
        taking.counted("logs", 1, includesWritesTaken: false)
        #expect(!taking.needsCount(try Self.put(Self.logs, "y"), existing: nil))
        #expect(taking.needsCount(try Self.put(Self.notes, "y"), existing: nil), "each collection is counted on its own")
    }

    @Test("The collection limit counts the call's own creates and deletes, whether the store's count includes them or not")
    func limitCountsTheCallsWrites() throws {
        for includesWritesTaken in [false, true] {
            var taking = Self.taking(version: 0)
            // One live document stored; the call deletes it, then creates two (the limit is 2), then a third.
            _ = taking.take(try Self.write(taking, Self.delete(Self.logs, "old"), existing: Self.live(Self.logs, "old", version: 1)))
            // A store that writes as it takes already counts the delete: 0 live; one that writes at the end still finds 1.
            taking.counted("logs", includesWritesTaken ? 0 : 1, includesWritesTaken: includesWritesTaken)
            _ = taking.take(try Self.write(taking, try Self.put(Self.logs, "a")))
            _ = taking.take(try Self.write(taking, try Self.put(Self.logs, "b")))
            guard case .answered(.refused(let error)) = taking.plan(try Self.put(Self.logs, "c"), existing: nil) else {
                Issue.record("a third live document was not refused (includesWritesTaken: \(includesWritesTaken))")
                continue
            }
            #expect(error.code == .collectionFull)
            #expect(taking.version == 3, "a refusal takes no version")
        }
    }

    @Test("The budget counts the call's own writes: rows (tombstones stay), bytes; a full collection is answered first")
    func budget() throws {
        // Stored: one document of 7 bytes; the budget: 3 rows, 20 bytes.
        var taking = Self.taking(version: 1, usage: SyncUsage(documents: 1, bytes: 7), budget: SyncBudget(documents: 3, bytes: 20))
        taking.counted("notes", 0, includesWritesTaken: false)
        taking.counted("logs", 1, includesWritesTaken: false)
        let created = try Self.write(taking, try Self.put(Self.logs, "a"))
        #expect(created.usage == SyncUsage(documents: 2, bytes: 14))
        _ = taking.take(created)
        // A delete keeps its row (a tombstone) and frees its bytes.
        _ = taking.take(try Self.write(taking, Self.delete(Self.logs, "old"), existing: Self.live(Self.logs, "old", version: 1)))
        #expect(taking.usage == SyncUsage(documents: 2, bytes: 7))
        _ = taking.take(try Self.write(taking, try Self.put(Self.notes, "b")))
        #expect(taking.usage == SyncUsage(documents: 3, bytes: 14) && taking.version == 4)
        // A fourth row is refused by the budget, unless the collection is full, which is said first.
        guard case .answered(.refused(let storage)) = taking.plan(try Self.put(Self.logs, "c"), existing: nil),
            case .answered(.refused(let full)) = taking.plan(try Self.put(Self.notes, "c"), existing: nil)
        else {
            Issue.record("a fourth row was not refused")
            return
        }
        #expect(storage.code == .storageFull && full.code == .collectionFull)
        // A replacement within the bytes left is taken.
        let replaced = try Self.write(taking, try Self.put(Self.notes, "b"), existing: Self.live(Self.notes, "b", version: 4))
        #expect(replaced.usage == SyncUsage(documents: 3, bytes: 14))
    }

    @Test("A create in a metered collection charges its action first; a replacement or a delete charges nothing")
    func charges() throws {
        let taking = Self.taking(version: 0)
        let create = try Self.write(taking, try Self.put(Self.logs, "a"))
        #expect(create.charge(userId: "u1") == .performAction(userId: "u1", action: Self.action, quotaLimit: 3))
        let existing = Self.live(Self.logs, "a", version: 1)
        #expect(try Self.write(taking, try Self.put(Self.logs, "a"), existing: existing).charge(userId: "u1") == nil)
        #expect(try Self.write(taking, Self.delete(Self.logs, "a"), existing: existing).charge(userId: "u1") == nil)
        #expect(try Self.write(taking, try Self.put(Self.notes, "a")).charge(userId: "u1") == nil, "an unmetered collection")
    }

    @Test("Conflicts and refusals are answered as the planner decides them, and take no version")
    func answers() throws {
        let taking = Self.taking(version: 7)
        let existing = Self.live(Self.notes, "a", version: 5)
        var stale = try Self.put(Self.notes, "a")
        stale.ifVersion = 4
        guard case .answered(.conflict(let current)) = taking.plan(stale, existing: existing) else {
            Issue.record("expected a conflict")
            return
        }
        #expect(current == existing)
        guard case .answered(.refused(let error)) = taking.plan(Self.delete(Self.notes, "b"), existing: nil) else {
            Issue.record("expected a refusal")
            return
        }
        #expect(error.code == .documentNotFound && taking.version == 7)
    }

    // MARK: - Change paging

    private static func documents(_ versions: ClosedRange<Int64>) -> [DocumentRecord] {
        versions.map { live(notes, "d\($0)", version: $0) }
    }

    @Test("A page reads one more than its limit: with it, more are waiting and the cursor is the page's last version")
    func pageCursor() throws {
        let paging = ChangePaging(after: 10, limit: 3)
        #expect(paging.readLimit == 4 && paging.since == 10 && paging.includesTombstones)
        let full = try paging.page(
            paging.bound.cut(Self.documents(11...14)), version: 20, purgedThrough: 0, lastMutationIds: ["c": 2])
        #expect(full == ChangePage(changes: Self.documents(11...13), cursor: 13, hasMore: true, lastMutationIds: ["c": 2]))
        let last = try paging.page(paging.bound.cut(Self.documents(11...13)), version: 20, purgedThrough: 0, lastMutationIds: [:])
        #expect(last == ChangePage(changes: Self.documents(11...13), cursor: 20, hasMore: false, lastMutationIds: [:]))
        let empty = try paging.page(paging.bound.cut([]), version: 10, purgedThrough: 0, lastMutationIds: [:])
        #expect(empty == ChangePage(changes: [], cursor: 10, hasMore: false, lastMutationIds: [:]))
    }

    @Test("A page the bytes end early has more waiting, its cursor the last document it took")
    func pageBytes() throws {
        // Each document holds 7 bytes: 15 bytes take two.
        let paging = ChangePaging(after: 10, limit: 3, maxBytes: 15)
        let page = try paging.page(paging.bound.cut(Self.documents(11...14)), version: 20, purgedThrough: 0, lastMutationIds: [:])
        #expect(page == ChangePage(changes: Self.documents(11...12), cursor: 12, hasMore: true, lastMutationIds: [:]))
    }

    @Test("A pull without a cursor reads the live state from the start; a limit below 1 pages by one")
    func firstPull() {
        let paging = ChangePaging(after: nil, limit: 0)
        #expect(paging.bound.limit == 1 && paging.readLimit == 2 && paging.since == 0 && !paging.includesTombstones)
        #expect(throws: Never.self) { try paging.check(version: 0, purgedThrough: 50) }
    }

    @Test("A cursor below the newest purged tombstone, or above the user's version, must resync; the edges do not")
    func resync() {
        for after: Int64 in [4, 21] {
            let error = #expect(throws: StoreError.self) {
                try ChangePaging(after: after, limit: 5).page(([], false), version: 20, purgedThrough: 5, lastMutationIds: [:])
            }
            #expect(error?.code == .resyncRequired)
        }
        for after: Int64 in [5, 20] {
            #expect(throws: Never.self) { try ChangePaging(after: after, limit: 5).check(version: 20, purgedThrough: 5) }
        }
    }
}
