import Foundation
import GRDB
import TallyAPI
import Testing
@testable import TallyClient

@Suite("Local document store", .timeLimit(.minutes(1)))
struct LocalDocumentStoreTests {
    typealias F = LocalStoreFixture

    @Test func aWriteReachesObserversBeforeItReturnsAndSurvivesAKill() throws {
        let fixture = F()
        defer { fixture.cleanUp() }
        var store: LocalDocumentStore? = try fixture.open()
        let heard = Locked<[LocalStoreChange]>([])
        _ = store!.addObserver { change in heard.withLock { $0.append(change) } }

        let run = F.log("run-1101")
        let written = try store!.write(.put(run, F.logData("2026-11-01", done: false)))
        #expect(heard.withLock { $0 } == [.documents([run])])
        #expect(written == LocalDocument(key: run, data: F.logData("2026-11-01", done: false), version: 0, updatedAt: nil, pending: true))
        try store!.write(.patch(run, .object(["done": .bool(true)])))
        try store!.write(.put(DocumentKey(collection: "notes", id: "n1"), .object(["text": .string("hi")])))
        let clientId = store!.clientId
        store = nil  // no close, no push: what a kill leaves

        let reopened = try fixture.open()
        #expect(reopened.clientId == clientId)
        #expect(try reopened.document(run)?.data == F.logData("2026-11-01", done: true))
        #expect(try reopened.pendingMutations(limit: 10).map(\.id) == [1, 2, 3])
        #expect(try reopened.pendingMutations(limit: 10).map(\.op) == [.put, .patch, .put])
    }

    static func size(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
    }

    @Test func localWritesNeverCheckpointAndCheckpointsRunOnTheirOwnConnection() throws {
        let fixture = F()
        defer { fixture.cleanUp() }
        let store = try fixture.open()
        let before = Self.size(fixture.path.path)
        // 600 writes take the log far past SQLite's automatic checkpoint (1,000 pages), yet none copied it into the file.
        for day in 0..<600 { try store.write(.put(F.log("d\(day)"), F.logData("2027-01-01", done: day % 2 == 0))) }
        #expect(Self.size(fixture.path.path + "-wal") > 1_000 * 4_096)
        #expect(Self.size(fixture.path.path) == before, "a local write checkpointed")
        store.checkpoint()
        #expect(Self.size(fixture.path.path) > before, "the checkpoint copied nothing")
        #expect(try store.documents(in: "habit_logs", from: nil, to: nil, descending: false, limit: nil).count == 600)
    }

    @Test func badWritesAreRefusedAndChangeNothing() throws {
        let fixture = F()
        defer { fixture.cleanUp() }
        let store = try fixture.open()
        let refused: [LocalWrite] = [
            .put(DocumentKey(collection: "nope", id: "a"), .object([:])),
            .put(F.log("bad id"), F.logData("2026-11-01", done: true)),
            .put(F.log("no-date"), .object(["done": .bool(true)])),
            .put(F.log("array"), .array([])),
            .patch(F.log("a"), .string("x")),
        ]
        for write in refused {
            #expect(throws: ClientError.self) { try store.write(write) }
        }
        #expect(try store.syncState().pendingCount == 0)
        #expect(try store.documents(in: "habit_logs").isEmpty)
    }

    @Test func aSecondStoreOnTheFileIsSeenAfterRefreshAndSharesTheIdSequence() throws {
        let fixture = F()
        defer { fixture.cleanUp() }
        let app = try fixture.open()
        let widget = try fixture.open()
        let heard = Locked<[LocalStoreChange]>([])
        _ = app.addObserver { change in heard.withLock { $0.append(change) } }

        try app.write(.put(F.log("a"), F.logData("2026-11-01", done: false)))
        #expect(try app.refreshFromOtherProcesses() == false)  // its own commit is not another process's
        try widget.write(.put(F.log("w"), F.logData("2026-11-02", done: true)))
        try app.write(.patch(F.log("a"), .object(["done": .bool(true)])))

        #expect(try app.refreshFromOtherProcesses() == true)
        #expect(heard.withLock { $0 }.last == .everything)
        #expect(try app.refreshFromOtherProcesses() == false)
        #expect(try app.document(F.log("w"))?.pending == true)
        #expect(widget.clientId == app.clientId)
        let outbox = try app.pendingMutations(limit: 10)
        #expect(outbox.map(\.id) == [1, 2, 3])
        #expect(outbox.map(\.docId) == ["a", "w", "a"])
    }

    @Test func aFullPullOverPagesRemovesWhatItLacksButKeepsPendingWrites() throws {
        let fixture = F()
        defer { fixture.cleanUp() }
        let store = try fixture.open()
        let (a, b, c, d) = (F.log("a"), F.log("b"), F.log("c"), F.log("d"))
        try store.apply(pull: F.page([a, b, c].enumerated().map { F.server($1, F.logData("2026-11-0\($0 + 1)", done: false), version: Int64($0 + 1)) },
                                     cursor: "3"))
        try store.write(.put(d, F.logData("2026-11-04", done: true)))  // a local creation
        try store.write(.patch(c, .object(["done": .bool(true)])))  // a local edit of a document deleted elsewhere

        #expect(try store.syncState().lastSyncAt == fixture.clock.now)

        try store.resetForResync()
        #expect(try store.syncState().cursor == nil)
        fixture.clock.advance(by: 60)
        try store.apply(pull: F.page([F.server(a, F.logData("2026-11-01", done: true), version: 9)], cursor: "9", hasMore: true))
        #expect(try store.syncState().lastSyncAt == fixture.clock.now.addingTimeInterval(-60), "a pull is complete on its last page")
        #expect(try store.document(b) != nil, "removal waits for the last page")
        let heard = Locked<[LocalStoreChange]>([])
        _ = store.addObserver { change in heard.withLock { $0.append(change) } }
        try store.apply(pull: F.page([F.server(d, F.logData("2026-11-04", done: false), version: 10, deleted: true)], cursor: "10"))
        #expect(heard.withLock { $0 } == [.documents([b, c, d])], "the pulled one and the removed ones")

        #expect(try store.documents(in: "habit_logs").map(\.key) == [a, d])
        #expect(try store.document(a)?.data == F.logData("2026-11-01", done: true))
        #expect(try store.document(d)?.pending == true)
        #expect(try store.syncState().pendingCount == 2)
        #expect(try store.syncState().cursor == "10")
        #expect(try store.syncState().lastSyncAt == fixture.clock.now)
    }

    @Test func aConflictRollsBackExactlyTheConflictingChange() throws {
        let fixture = F()
        defer { fixture.cleanUp() }
        let store = try fixture.open()
        let (x, y) = (F.log("x"), F.log("y"))
        try store.apply(pull: F.page([F.server(x, F.logData("2026-11-01", done: false), version: 1),
                                      F.server(y, F.logData("2026-11-02", done: false), version: 2)], cursor: "2"))
        try store.write(.patch(x, .object(["done": .bool(true)]), ifVersion: 1))
        try store.write(.patch(y, .object(["done": .bool(true)])))
        try store.write(.patch(x, .object(["note": .string("later")])))

        let current = F.server(x, .object(["date": .string("2026-11-01"), "done": .bool(false), "by": .string("other")]), version: 5)
        let refusals = try store.apply(push: SyncPushResponse(
            lastMutationId: 1, results: [SyncMutationResult(id: 1, status: .conflict, current: current)]))

        #expect(refusals.map(\.key) == [x])
        #expect(refusals.first?.reason == .conflict(current: current))
        // x: the server's state with only the later, unrefused patch on top; y untouched.
        #expect(try store.document(x) == LocalDocument(
            key: x, data: .object(["date": .string("2026-11-01"), "done": .bool(false), "by": .string("other"), "note": .string("later")]),
            version: 5, updatedAt: current.updatedAt, pending: true))
        #expect(try store.document(y)?.data == F.logData("2026-11-02", done: true))
        #expect(try store.pendingMutations(limit: 10).map(\.id) == [2, 3])
    }

    @Test func aMonthOfTenThousandDocumentsIsReadThroughTheIndex() throws {
        let fixture = F()
        defer { fixture.cleanUp() }
        let store = try fixture.open()
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        let start = Date(timeIntervalSince1970: 946_684_800)  // 2000-01-01
        let documents = (0..<10_000).map { day in
            let date = formatter.string(from: start.addingTimeInterval(Double(day) * 86_400))
            return F.server(F.log("run-\(date)"), F.logData(date, done: day % 2 == 0), version: Int64(day + 1))
        }
        try store.apply(pull: F.page(documents, cursor: "10000"))

        let month = try store.documents(in: "habit_logs", from: "2020-01-01", to: "2020-02-01")
        #expect(month.count == 31)
        #expect(month.first?.key.id == "run-2020-01-01" && month.last?.key.id == "run-2020-01-31")
        #expect(try store.documents(in: "habit_logs", from: "2020-01-01", to: "2020-02-01", descending: true, limit: 3)
            .map(\.key.id) == ["run-2020-01-31", "run-2020-01-30", "run-2020-01-29"])

        for descending in [false, true] {
            let (sql, arguments) = LocalDocumentStore.rangeQuery(collection: "habit_logs", from: "2020-01-01", to: "2020-02-01",
                                                                 descending: descending, limit: 31)
            let plan = try store.reading { db in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: arguments).map { $0["detail"] as String }
            }
            #expect(plan.contains { $0.contains("USING INDEX visible_range (collection=? AND range_value>? AND range_value<?)") }, "\(plan)")
            #expect(!plan.contains { $0.contains("TEMP B-TREE") }, "sorted by the index: \(plan)")
        }
    }

    /// Issue 43: a client crashed (SIGSEGV) reading the documents of a user being signed out; GRDB's
    /// `DatabasePool.close()` releases the pool's readers without a lock, so a read racing it may use them freed.
    @Test("Reads and writes racing the store's close return, or throw unauthorized: none reaches a closed connection")
    func callsRacingTheCloseAreRefused() throws {
        for round in 0..<40 {
            let fixture = LocalStoreFixture()
            defer { fixture.cleanUp() }
            let store = try fixture.open()
            for index in 0..<20 { try store.write(.put(F.log("d\(index)"), F.logData("2026-11-\(10 + index)", done: false))) }
            let unexpected = Locked<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 4) { worker in
                if worker == 0 {
                    // The close lands while the others read and write.
                    for _ in 0..<(round % 8) * 50 { _ = try? store.syncState() }
                    do { try store.close() } catch { unexpected.withLock { $0.append("close: \(error)") } }
                    return
                }
                for index in 0..<200 {
                    do {
                        if worker == 3 {
                            try store.write(.put(F.log("w\(index)"), F.logData("2026-12-01", done: true)))
                        } else {
                            _ = try store.documents(in: "habit_logs")
                            _ = try store.document(F.log("d1"))
                        }
                    } catch let error as ClientError where error.code == .unauthorized {
                        // Refused once the store is closed.
                    } catch {
                        unexpected.withLock { $0.append("\(error)") }
                    }
                }
            }
            let found = unexpected.withLock { $0 }
            #expect(found.count == 0, "round \(round): \(Set(found).sorted().prefix(3))")
            #expect(throws: ClientError.self) { try store.documents(in: "habit_logs") }
        }
    }

    @Test func removeLeavesNoFileOfTheUser() throws {
        let fixture = F()
        defer { fixture.cleanUp() }
        #expect(!fixture.path.lastPathComponent.contains("user-1"))
        #expect(LocalDocumentStore.path(directory: fixture.directory, userId: "user-2") != fixture.path)
        let other = try LocalDocumentStore(path: LocalDocumentStore.path(directory: fixture.directory, userId: "user-2").path,
                                           rangeKeys: F.rangeKeys)
        let store = try fixture.open()
        try store.write(.put(F.log("a"), F.logData("2026-11-01", done: true)))
        let files = { try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path) }
        #expect(try files().contains { $0.hasPrefix(fixture.path.lastPathComponent + "-") }, "WAL files exist while open")

        try store.close()
        try LocalDocumentStore.remove(path: fixture.path)
        let left = try files()
        #expect(left.allSatisfy { !$0.hasPrefix(fixture.path.lastPathComponent) }, "\(left)")
        #expect(left.contains(LocalDocumentStore.path(directory: fixture.directory, userId: "user-2").lastPathComponent))
        try other.close()
    }
}

/// A real second process on the store's file: Swift Testing's exit test runs the closure in a child process.
@Suite("Local document store: a second process", .timeLimit(.minutes(1)))
struct LocalDocumentStoreProcessTests {
    @Test func aWidgetProcessKilledAfterItsWriteIsSeenByTheApp() async throws {
        let fixture = LocalStoreFixture()
        defer { fixture.cleanUp() }
        let app = try fixture.open()
        try app.write(.put(LocalStoreFixture.log("a"), LocalStoreFixture.logData("2026-11-01", done: false)))

        await #expect(processExitsWith: .signal(SIGKILL)) { [path = fixture.path.path as String] in
            let widget = try LocalDocumentStore(path: path, rangeKeys: LocalStoreFixture.rangeKeys)
            try widget.write(.put(LocalStoreFixture.log("w"), LocalStoreFixture.logData("2026-11-02", done: true)))
            kill(getpid(), SIGKILL)  // no close, no cleanup: killed right after the commit
        }

        #expect(try app.refreshFromOtherProcesses() == true)
        #expect(try app.document(LocalStoreFixture.log("w"))?.data == LocalStoreFixture.logData("2026-11-02", done: true))
        #expect(try app.pendingMutations(limit: 10).map(\.docId) == ["a", "w"])
        #expect(try app.pendingMutations(limit: 10).map(\.id) == [1, 2])
        try app.write(.delete(LocalStoreFixture.log("a")))
        #expect(try app.pendingMutations(limit: 10).map(\.id) == [1, 2, 3])
    }
}
