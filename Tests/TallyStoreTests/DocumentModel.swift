import Foundation
import TallyAPI
import TallyStore
import Testing

/// What a store must hold after each write, kept in memory: ``DocumentPlanner``'s answer on the model's
/// records (the planner's rules have tests of their own; this checks that a store applies them, versions,
/// keeps and pulls the results).
struct DocumentModel {
    /// Every document ever written, tombstones included.
    var records: [DocumentKey: DocumentRecord] = [:]
    /// The user's current version.
    var version: Int64 = 0
    /// Each client's last mutation id.
    var lastMutationIds: [String: Int64] = [:]

    /// The live documents.
    var live: [DocumentKey: DocumentRecord] { records.filter { !$0.value.deleted } }

    /// Applies `mutation` as a store must; returns the result it must give (rejections without state: these
    /// collections are not metered).
    mutating func apply(_ mutation: DocumentMutation, now: Date) -> MutationResult {
        let key = DocumentKey(mutation.collection.name, mutation.docId)
        let liveCount = records.values.count(where: { $0.collection == key.collection && !$0.deleted })
        switch DocumentPlanner.plan(mutation, existing: records[key], liveCount: liveCount) {
        case .conflict(let current):
            return .conflict(current: current)
        case .refused(let code):
            return .rejected(code, state: nil)
        case .write(let data, let rangeValue, let deleted, _, _):
            version += 1
            let record = DocumentRecord(
                collection: key.collection, id: key.id, data: data, rangeValue: rangeValue, version: version,
                updatedAt: Date(millis: now.millis), deleted: deleted)
            records[key] = record
            return .applied(record)
        }
    }
}

/// A seeded run of random writes to three collections (one with a range key, one small enough to fill and to
/// overflow), by REST and by pushes of three clients (some retried whole), checking each result against
/// ``DocumentModel``; then pulls from the start and from cursors taken along the way, replayed into replicas,
/// must equal the model, as must range queries, the counter and the clients' last mutation ids.
struct RandomWrites {
    let label: String
    var random: SplitMix64
    var model = DocumentModel()
    let collections = [Collections.notes, Collections.logs, Collections.small]

    init(seed: UInt64, label: String) {
        self.label = label
        random = SplitMix64(seed: seed)
    }

    mutating func run(_ f: Fixture, rounds: Int = 150, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let user = try await f.newUser()
        let clients = (0..<3).map { _ in randomId("client-") }
        var lastBatch: [String: [ClientMutation]] = [:]
        var checkpoints: [(cursor: Int64, replica: [DocumentKey: DocumentRecord])] = []
        for _ in 0..<rounds {
            f.clock.advance(by: 1)
            if random.unit() < 0.4 {
                try await restWrite(f, user: user, sourceLocation: sourceLocation)
            } else {
                let client = clients[Int.random(in: 0..<clients.count, using: &random)]
                if let previous = lastBatch[client], random.unit() < 0.2 {
                    let outcome = try await f.store.push(userId: user, clientId: client, mutations: previous, now: f.now)
                    #expect(
                        outcome.results == Array(repeating: .duplicate, count: previous.count)
                            && outcome.lastMutationId == model.lastMutationIds[client], "\(label) a retried batch", sourceLocation: sourceLocation)
                    continue
                }
                var batch: [ClientMutation] = []
                var expected: [MutationResult] = []
                var next = model.lastMutationIds[client, default: 0]
                for _ in 0..<Int.random(in: 1...8, using: &random) {
                    next += Int64.random(in: 1...2, using: &random)
                    let change = randomMutation()
                    batch.append(ClientMutation(id: next, mutation: change))
                    expected.append(model.apply(change, now: f.now))
                }
                model.lastMutationIds[client] = next
                lastBatch[client] = batch
                let outcome = try await f.store.push(userId: user, clientId: client, mutations: batch, now: f.now)
                #expect(outcome.results == expected, "\(label) push \(batch)", sourceLocation: sourceLocation)
                #expect(outcome.lastMutationId == next, "\(label)", sourceLocation: sourceLocation)
            }
            if random.unit() < 0.08 {
                let (changes, cursor) = try await f.allChanges(user, pageSize: Int.random(in: 1...9, using: &random))
                var replica: [DocumentKey: DocumentRecord] = [:]
                replay(changes, into: &replica)
                #expect(replica == model.live && cursor == model.version, "\(label) a pull along the way", sourceLocation: sourceLocation)
                checkpoints.append((cursor, replica))
            }
        }

        var restored: [DocumentKey: DocumentRecord] = [:]
        let pulled = try await f.allChanges(user, pageSize: Int.random(in: 1...20, using: &random))
        replay(pulled.changes, into: &restored)
        #expect(restored == model.live && pulled.cursor == model.version, "\(label) a pull from nothing", sourceLocation: sourceLocation)
        #expect(!checkpoints.isEmpty, "\(label) no checkpoint", sourceLocation: sourceLocation)
        for (cursor, replica) in checkpoints {
            var caughtUp = replica
            let later = try await f.allChanges(user, after: cursor, pageSize: Int.random(in: 1...9, using: &random))
            replay(later.changes, into: &caughtUp)
            #expect(caughtUp == model.live, "\(label) a pull from cursor \(cursor)", sourceLocation: sourceLocation)
        }
        let everything = try await f.allChanges(user, after: 0, pageSize: 50).changes
        #expect(Dictionary(uniqueKeysWithValues: everything.map { (DocumentKey($0), $0) }) == model.records, "\(label)", sourceLocation: sourceLocation)
        for collection in collections {
            let expected = model.live.values.filter { $0.collection == collection.name }
                .sorted { ($0.rangeValue ?? "", $0.id) < ($1.rangeValue ?? "", $1.id) }
            #expect(try await f.allDocuments(user, collection.name, pageSize: 4) == expected, "\(label) \(collection.name)", sourceLocation: sourceLocation)
        }
        let lastIds = try await f.store.changes(userId: user, after: nil, limit: 1).lastMutationIds
        #expect(lastIds == model.lastMutationIds, "\(label)", sourceLocation: sourceLocation)
    }

    /// One REST write, checked against the model: the written record, or the refusal with the current document.
    private mutating func restWrite(_ f: Fixture, user: String, sourceLocation: SourceLocation) async throws {
        let change = randomMutation()
        let live = model.live[DocumentKey(change.collection.name, change.docId)]
        let expected = model.apply(change, now: f.now)
        do {
            let outcome = try await f.write(user, change.collection, change.docId, change.operation, ifVersion: change.ifVersion)
            #expect(
                expected == .applied(outcome.document) && outcome.created == (live == nil && !outcome.document.deleted),
                "\(label) \(change) expected \(expected)", sourceLocation: sourceLocation)
        } catch let error as StoreError {
            switch expected {
            case .conflict(let current):
                #expect(error.code == .versionConflict && error.current == current, "\(label) \(change)", sourceLocation: sourceLocation)
            case .rejected(let code, _):
                #expect(error.code == code, "\(label) \(change)", sourceLocation: sourceLocation)
            default:
                Issue.record("\(label) \(change) refused with \(error), expected \(expected)", sourceLocation: sourceLocation)
            }
        }
    }

    /// A put, patch or delete of one of a few ids, sometimes with a precondition, right or wrong.
    private mutating func randomMutation() -> DocumentMutation {
        let collection = collections[Int.random(in: 0..<collections.count, using: &random)]
        let docId = "d\(Int.random(in: 0..<5, using: &random))"
        let current = model.records[DocumentKey(collection.name, docId)]?.liveVersion ?? 0
        let operation: DocumentMutation.Operation
        switch random.unit() {
        case ..<0.45: operation = .put(randomData(collection))
        case ..<0.75: operation = .patch(randomPatch(collection))
        default: operation = .delete
        }
        let ifVersion: Int64?
        switch random.unit() {
        case ..<0.15: ifVersion = current
        case ..<0.22: ifVersion = current + Int64.random(in: 1...3, using: &random)
        default: ifVersion = nil
        }
        return DocumentMutation(collection: collection, docId: docId, operation: operation, ifVersion: ifVersion)
    }

    private mutating func randomData(_ collection: CollectionSpec) -> JSONValue {
        var fields: [JSONKey: JSONValue] = [:]
        for name in ["a", "b", "c"] where random.unit() < 0.6 { fields[name] = randomValue() }
        if collection.rangeKey != nil, random.unit() < 0.9 { fields["date"] = .string("2027-03-1\(Int.random(in: 0..<5, using: &random))") }
        if collection.maxDocumentBytes < 100, random.unit() < 0.2 { fields["big"] = .string(String(repeating: "x", count: 60)) }
        return .object(fields)
    }

    private mutating func randomPatch(_ collection: CollectionSpec) -> JSONValue {
        var fields: [JSONKey: JSONValue] = [:]
        for name in ["a", "b", "c"] where random.unit() < 0.5 { fields[name] = random.unit() < 0.3 ? .null : randomValue() }
        if collection.rangeKey != nil, random.unit() < 0.3 {
            fields["date"] = random.unit() < 0.2 ? .null : .string("2027-03-1\(Int.random(in: 0..<5, using: &random))")
        }
        return .object(fields)
    }

    private mutating func randomValue() -> JSONValue {
        switch Int.random(in: 0..<5, using: &random) {
        case 0: return .int(Int.random(in: -1_000...1_000, using: &random))
        case 1: return .string(random.hex(Int.random(in: 0...6, using: &random)))
        case 2: return .bool(random.unit() < 0.5)
        case 3: return .array([.int(Int.random(in: 0...9, using: &random)), .null])
        default: return .object(["x": randomValue(), "y": random.unit() < 0.5 ? .null : .string("y")])
        }
    }
}
