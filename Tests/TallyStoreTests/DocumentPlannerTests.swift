import Foundation
import TallyAPI
import TallyStore
import Testing

@Suite("DocumentPlanner: the write rules both stores apply", .timeLimit(.minutes(1)))
struct DocumentPlannerTests {
    let logs = CollectionSpec(name: "habit_logs", rangeKey: "date", maxDocumentBytes: 64, maxDocuments: 2)

    func record(_ json: String, version: Int64 = 5, deleted: Bool = false) -> DocumentRecord {
        DocumentRecord(
            collection: "habit_logs", id: "d1", data: deleted ? [] : Array(json.utf8), rangeValue: nil, version: version,
            updatedAt: Date(timeIntervalSince1970: 0), deleted: deleted)
    }

    func plan(_ operation: DocumentMutation.Operation, on existing: DocumentRecord?, ifVersion: Int64? = nil, count: Int = 0)
        -> DocumentPlan
    {
        DocumentPlanner.plan(
            DocumentMutation(collection: logs, docId: "d1", operation: operation, ifVersion: ifVersion), existing: existing,
            liveCount: count)
    }

    @Test("The storage budget refuses a new row past its documents and growth past its bytes; deletes, revivals and shrinking pass")
    func budget() throws {
        let data = try JSONValue.parse(#"{"date":"2026-11-24"}"#)  // 21 bytes
        let budget = SyncBudget(documents: 10, bytes: 100, clientIds: 1)
        func planned(_ operation: DocumentMutation.Operation, on existing: DocumentRecord?, documents: Int64, bytes: Int64) -> DocumentPlan {
            DocumentPlanner.plan(
                DocumentMutation(collection: logs, docId: "d1", operation: operation), existing: existing, liveCount: 0,
                usage: SyncUsage(documents: documents, bytes: bytes), budget: budget)
        }
        let full = DocumentPlan.refused(.storageFull)
        #expect(planned(.put(data), on: nil, documents: 9, bytes: 0) != full, "the 10th row")
        #expect(planned(.put(data), on: nil, documents: 10, bytes: 0) == full, "the 11th row")
        #expect(planned(.put(data), on: record("", deleted: true), documents: 10, bytes: 0) != full, "a tombstone's own row")
        #expect(planned(.put(data), on: nil, documents: 0, bytes: 79) != full, "79 + 21 = 100 bytes")
        #expect(planned(.put(data), on: nil, documents: 0, bytes: 80) == full, "101 bytes")
        let live = record(#"{"date":"2026-11-24","x":1234567890}"#)  // 35 bytes
        #expect(planned(.put(data), on: live, documents: 20, bytes: 500) != full, "shrinking while over a lowered budget")
        #expect(planned(.delete, on: live, documents: 20, bytes: 500) != full)
        #expect(planned(.patch(try JSONValue.parse(#"{"y":"longer"}"#)), on: live, documents: 1, bytes: 99) == full, "growing past it")
        // Without a usage (models of the other rules), no budget.
        #expect(plan(.put(data), on: nil) != full)
    }

    @Test("A put creates where nothing or a tombstone is, and replaces a live document")
    func put() throws {
        let data = try JSONValue.parse(#"{"date":"2026-11-24","done":true}"#)
        let written = DocumentPlan.write(data: data.bytes, rangeValue: "2026-11-24", deleted: false, creates: true, removes: false)
        #expect(plan(.put(data), on: nil) == written)
        #expect(plan(.put(data), on: record("", deleted: true)) == written)
        #expect(plan(.put(data), on: record(#"{"date":"x"}"#))
            == .write(data: data.bytes, rangeValue: "2026-11-24", deleted: false, creates: false, removes: false))
    }

    @Test("A patch merges into the live document; patch and delete of an absent or deleted one are not found")
    func patchAndDelete() throws {
        let current = record(#"{"date":"2026-11-24","done":false,"note":"a"}"#)
        let patched = try JSONValue.parse(#"{"date":"2026-11-24","done":true}"#)
        #expect(plan(.patch(try JSONValue.parse(#"{"done":true,"note":null}"#)), on: current)
            == .write(data: patched.bytes, rangeValue: "2026-11-24", deleted: false, creates: false, removes: false))
        #expect(plan(.delete, on: current) == .write(data: [], rangeValue: nil, deleted: true, creates: false, removes: true))
        for absent in [nil, record("", deleted: true)] {
            #expect(plan(.patch(.object([:])), on: absent) == .refused(.documentNotFound))
            #expect(plan(.delete, on: absent) == .refused(.documentNotFound))
        }
    }

    @Test("ifVersion: the live version or 0 for none; a mismatch is a conflict carrying the live document")
    func preconditions() throws {
        let data = try JSONValue.parse(#"{"date":"d"}"#)
        let current = record(#"{"date":"c"}"#, version: 5)
        #expect(plan(.put(data), on: current, ifVersion: 4) == .conflict(current: current))
        #expect(plan(.put(data), on: current, ifVersion: 0) == .conflict(current: current))
        guard case .write = plan(.put(data), on: current, ifVersion: 5) else { Issue.record("ifVersion 5 refused"); return }
        guard case .write = plan(.put(data), on: record("", version: 9, deleted: true), ifVersion: 0) else {
            Issue.record("ifVersion 0 on a tombstone refused")
            return
        }
        #expect(plan(.put(data), on: record("", version: 9, deleted: true), ifVersion: 9) == .conflict(current: nil))
        #expect(plan(.delete, on: nil, ifVersion: 3) == .conflict(current: nil))
    }

    @Test("Refusals: not an object, range key missing or not a string, too large, collection full")
    func refusals() throws {
        #expect(plan(.put(.array([])), on: nil) == .refused(.invalidDocument))
        #expect(plan(.put(try JSONValue.parse(#"{"day":"x"}"#)), on: nil) == .refused(.invalidDocument))
        #expect(plan(.put(try JSONValue.parse(#"{"date":7}"#)), on: nil) == .refused(.invalidDocument))
        #expect(plan(.patch(try JSONValue.parse(#"{"date":null}"#)), on: record(#"{"date":"x"}"#)) == .refused(.invalidDocument))
        // Range values are indexed: at most 1,024 bytes, no NUL.
        var roomy = DocumentMutation(collection: CollectionSpec(name: "logs", rangeKey: "date"), docId: "d", operation: .delete)
        roomy.operation = .put(.object(["date": .string(String(repeating: "é", count: 512))]))
        guard case .write = DocumentPlanner.plan(roomy, existing: nil, liveCount: 0) else {
            Issue.record("a range value of 1,024 bytes was refused")
            return
        }
        roomy.operation = .put(.object(["date": .string(String(repeating: "é", count: 512) + "x")]))
        #expect(DocumentPlanner.plan(roomy, existing: nil, liveCount: 0) == .refused(.invalidDocument))
        roomy.operation = .put(.object(["date": .string("2027-01-15\u{0}")]))
        #expect(DocumentPlanner.plan(roomy, existing: nil, liveCount: 0) == .refused(.invalidDocument))
        let big = JSONValue.object(["date": .string("d"), "pad": .string(String(repeating: "x", count: 64))])
        #expect(plan(.put(big), on: nil) == .refused(.documentTooLarge))
        let small = try JSONValue.parse(#"{"date":"d"}"#)
        #expect(plan(.put(small), on: nil, count: 2) == .refused(.collectionFull))
        // Replacing a live document does not need room.
        guard case .write = plan(.put(small), on: record(#"{"date":"c"}"#), count: 2) else {
            Issue.record("a replace in a full collection was refused")
            return
        }
    }

    @Test("Data that is wrong whatever the document's state is refused before a failed precondition is reported")
    func badDataBeforeConflict() throws {
        let current = record(#"{"date":"x"}"#, version: 5)
        #expect(plan(.put(.number("-1.9")), on: current, ifVersion: 4) == .refused(.invalidDocument))
        #expect(plan(.put(try JSONValue.parse(#"{"day":"x"}"#)), on: nil, ifVersion: 3) == .refused(.invalidDocument))
        let big = JSONValue.object(["date": .string("d"), "pad": .string(String(repeating: "x", count: 64))])
        #expect(plan(.put(big), on: current, ifVersion: 4) == .refused(.documentTooLarge))
        #expect(plan(.patch(.array([])), on: current, ifVersion: 4) == .refused(.invalidDocument))
        // A patch whose result is bad depends on the document: the precondition speaks first.
        #expect(plan(.patch(try JSONValue.parse(#"{"date":null}"#)), on: current, ifVersion: 4) == .conflict(current: current))
    }
}
