import Foundation
import TallyAPI
import TallyTestSupport
import Testing
@testable import TallyClient

/// Random local writes, push answers and pulled pages against a reference model written here from docs/sync.md:
/// after every step the store's visible state and outbox equal the model's.
@Suite("Local document store: property", .timeLimit(.minutes(2)))
struct LocalDocumentStorePropertyTests {
    /// What the server state of one document is in the model.
    struct BaseDoc: Equatable {
        var data: JSONValue
        var version: Int64
        var deleted: Bool
    }

    /// The reference model: a dictionary of base documents, a list of pending mutations, and the rules, simply.
    struct Model {
        var base: [DocumentKey: BaseDoc] = [:]
        var outbox: [SyncMutation] = []
        var issued: Int64 = 0
        var cursor: String?
        var resyncing = false
        var seen: Set<DocumentKey> = []

        mutating func store(_ document: Document) {
            let key = DocumentKey(collection: document.collection, id: document.id)
            if let old = base[key], old.version > document.version { return }
            base[key] = BaseDoc(data: document.data, version: document.version, deleted: document.deleted)
        }

        /// Every visible document: (data, version, pending).
        func visible() -> [DocumentKey: Snapshot] {
            var keys = Set(outbox.map { DocumentKey(collection: $0.collection, id: $0.docId) })
            keys.formUnion(base.keys)
            var result: [DocumentKey: Snapshot] = [:]
            for key in keys {
                let live = base[key].flatMap { $0.deleted ? nil : $0 }
                var data = live?.data
                let pending = outbox.filter { $0.collection == key.collection && $0.docId == key.id }
                for mutation in pending {
                    switch mutation.op {
                    case .put: data = mutation.data
                    case .patch: data = data.map { $0.merging(mutation.data!) }
                    case .delete: data = nil
                    }
                }
                if let data { result[key] = Snapshot(data: data, version: live?.version ?? 0, pending: !pending.isEmpty) }
            }
            return result
        }
    }

    struct Snapshot: Equatable, CustomStringConvertible {
        var data: JSONValue
        var version: Int64
        var pending: Bool
        var description: String { "\(data.text) v\(version)\(pending ? " pending" : "")" }
    }

    static let keys: [DocumentKey] = (0..<4).map { LocalStoreFixture.log("d\($0)") } + (0..<3).map { DocumentKey(collection: "notes", id: "n\($0)") }

    static func randomData(_ key: DocumentKey, _ random: inout SplitMix64, patch: Bool = false) -> JSONValue {
        var fields: [JSONKey: JSONValue] = [:]
        if key.collection == "habit_logs", !patch || random.next() % 3 == 0 {
            fields["date"] = .string("2026-11-0\(random.next() % 9 + 1)")
        }
        if !patch || random.next() % 2 == 0 { fields["done"] = .bool(random.next() % 2 == 0) }
        if random.next() % 2 == 0 { fields["n"] = .int(random.next() % 100) }
        if patch, random.next() % 3 == 0 { fields["n"] = .null }
        return .object(fields)
    }

    @Test(arguments: [UInt64(1), 2, 3, 20_261_124])
    func visibleIsBaseWithPendingApplied(seed: UInt64) throws {
        let fixture = LocalStoreFixture()
        defer { fixture.cleanUp() }
        var store = try fixture.open()
        var model = Model()
        var random = SplitMix64(seed: seed)
        var serverVersion: Int64 = 0
        var pulls = 0

        for step in 0..<400 {
            let context = "seed \(seed) step \(step)"
            switch random.next() % 10 {
            case 0...3:
                let key = Self.keys[Int(random.next() % UInt64(Self.keys.count))]
                let ifVersion: Int64? = random.next() % 4 == 0 ? Int64(random.next() % 5) : nil
                let write: LocalWrite = switch random.next() % 4 {
                case 0, 1: .put(key, Self.randomData(key, &random), ifVersion: ifVersion)
                case 2: .patch(key, Self.randomData(key, &random, patch: true), ifVersion: ifVersion)
                default: .delete(key, ifVersion: ifVersion)
                }
                try store.write(write)
                model.issued += 1
                model.outbox.append(SyncMutation(id: model.issued, op: write.op, collection: key.collection, docId: key.id,
                                                 data: write.data, ifVersion: write.ifVersion))
            case 4...5:
                let sent = Array(model.outbox.prefix(Int(random.next() % 6)))
                let answered = sent.prefix(Int(random.next() % UInt64(sent.count + 1)))
                var results: [SyncMutationResult] = []
                var expected: [PushRefusal] = []
                for mutation in answered {
                    let key = DocumentKey(collection: mutation.collection, id: mutation.docId)
                    switch random.next() % 4 {
                    case 0:
                        serverVersion += 1
                        results.append(SyncMutationResult(id: mutation.id, status: .applied, version: serverVersion))
                        let live = model.base[key].flatMap { $0.deleted ? nil : $0 }
                        if mutation.op == .patch, live == nil { break }
                        let data: JSONValue? = switch mutation.op {
                        case .put: mutation.data
                        case .patch: live!.data.merging(mutation.data!)
                        case .delete: nil
                        }
                        model.store(LocalStoreFixture.server(key, data ?? .object([:]), version: serverVersion, deleted: data == nil))
                    case 1:
                        serverVersion += 1
                        let current = random.next() % 3 == 0 ? nil : LocalStoreFixture.server(key, Self.randomData(key, &random), version: serverVersion)
                        results.append(SyncMutationResult(id: mutation.id, status: .conflict, current: current))
                        if let current { model.store(current) } else { model.base[key] = nil }
                        expected.append(PushRefusal(mutation: mutation, reason: .conflict(current: current)))
                    case 2:
                        let error = ErrorDetail(code: .documentTooLarge, message: "too large")
                        results.append(SyncMutationResult(id: mutation.id, status: .rejected, error: error))
                        expected.append(PushRefusal(mutation: mutation, reason: .rejected(error)))
                    default:
                        results.append(SyncMutationResult(id: mutation.id, status: .duplicate))
                    }
                }
                let last = answered.last?.id ?? 0
                model.outbox.removeAll { $0.id <= last }
                let refusals = try store.apply(push: SyncPushResponse(lastMutationId: last, results: results))
                #expect(refusals == expected, "\(context)")
            case 6...7:
                if model.cursor == nil {
                    model.resyncing = true
                    model.seen = []
                }
                var changes: [Document] = []
                for _ in 0..<Int(random.next() % 4) {
                    let key = Self.keys[Int(random.next() % UInt64(Self.keys.count))]
                    // Now and then an older state than the base holds: it must not win.
                    var version = Int64(random.next() % UInt64(serverVersion + 1)) + 1
                    if random.next() % 5 != 0 {
                        serverVersion += 1
                        version = serverVersion
                    }
                    let document = LocalStoreFixture.server(key, Self.randomData(key, &random), version: version, deleted: random.next() % 4 == 0)
                    changes.append(document)
                    model.store(document)
                    if model.resyncing { model.seen.insert(key) }
                }
                let hasMore = random.next() % 3 == 0
                var acknowledged: [String: Int64] = [:]
                if random.next() % 3 == 0, let pick = model.outbox.randomElement(using: &random) { acknowledged[store.clientId] = pick.id }
                acknowledged["other-client-0000"] = 7
                pulls += 1
                if !hasMore {
                    if let mine = acknowledged[store.clientId] { model.outbox.removeAll { $0.id <= mine } }
                    if model.resyncing {
                        model.base = model.base.filter { model.seen.contains($0.key) }
                        model.resyncing = false
                    }
                }
                model.cursor = "c\(pulls)"
                try store.apply(pull: LocalStoreFixture.page(changes, cursor: "c\(pulls)", hasMore: hasMore, acknowledged: acknowledged))
            case 8:
                try store.resetForResync()
                model.cursor = nil
                model.resyncing = false
            default:
                // Drop the store without closing it (a kill) and open the file again.
                store = try fixture.open()
            }

            var actual: [DocumentKey: Snapshot] = [:]
            for collection in LocalStoreFixture.rangeKeys.keys {
                for document in try store.documents(in: collection) {
                    actual[document.key] = Snapshot(data: document.data, version: document.version, pending: document.pending)
                }
            }
            let expected = model.visible()
            #expect(actual == expected, "\(context)")
            #expect(try store.pendingMutations(limit: 1_000) == model.outbox, "\(context)")
            #expect(try store.syncState().pendingCount == model.outbox.count, "\(context)")
            #expect(try store.syncState().cursor == model.cursor, "\(context)")
            if actual != expected { return }
        }
        // Ids keep increasing after every row was dropped and the file reopened.
        try store.apply(push: SyncPushResponse(lastMutationId: model.issued, results: []))
        store = try fixture.open()
        try store.write(.delete(Self.keys[0]))
        #expect(try store.pendingMutations(limit: 10).map(\.id) == [model.issued + 1])
    }
}
