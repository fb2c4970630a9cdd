import Foundation
import TallyAPI

/// What one syncing user sent and was told, for ``SyncBooksChecker``.
public struct SyncExpectation: Sendable, Hashable {
    /// The account.
    public var userId: String
    /// The user's sync client id.
    public var clientId: String
    /// Every mutation made, in id order (ids 1, 2, 3, …).
    public var mutations: [SyncMutation] = []
    /// The highest mutation id the server said it has (its last `lastMutationId`).
    public var acknowledged: Int64 = 0
    /// The version the server gave each mutation it answered `applied`, by mutation id.
    public var versions: [Int64: Int64] = [:]
    /// Mutations answered `conflict` or `rejected` (the scenario makes none: each is a violation).
    public var refused: [Int64] = []
    /// Pushes answered, and of their mutations how many were `duplicate` (a resent batch).
    public var pushes = 0, duplicates = 0

    /// A user's record, empty.
    public init(userId: String, clientId: String) {
        self.userId = userId
        self.clientId = clientId
    }

    /// Takes a push's answer.
    mutating func record(_ response: SyncPushResponse) {
        pushes += 1
        acknowledged = max(acknowledged, response.lastMutationId)
        for result in response.results {
            switch result.status {
            case .applied: if let version = result.version { versions[result.id] = version }
            case .duplicate: duplicates += 1
            case .conflict, .rejected: refused.append(result.id)
            }
        }
    }
}

/// The server's side of one syncing user: a full pull (live documents) and the client's last mutation id there.
public struct SyncServerState: Sendable, Hashable {
    /// The live documents.
    public var documents: [Document]
    /// `lastMutationIds[clientId]` of the pull (nil: the server never took a push of the client).
    public var lastMutationId: Int64?

    /// Creates one.
    public init(documents: [Document], lastMutationId: Int64?) {
        self.documents = documents
        self.lastMutationId = lastMutationId
    }
}

/// Checks a syncing user's documents against what it pushed. Pure, tested on hand-broken books.
///
/// The scenario's mutations never conflict and are never refused, and the user writes only by push, so the
/// server must hold exactly the replay of mutations 1…`lastMutationId` in order, each applied once: the
/// user's change counter moves by one per applied mutation, so a document's version is the position of the
/// last mutation that wrote it — a mutation applied twice (or lost) shifts every version after it.
public enum SyncBooksChecker {
    /// The violations found (none: the books balance).
    public static func check(_ expected: SyncExpectation, against server: SyncServerState) -> [Violation] {
        var problems: [String] = []
        let taken = server.lastMutationId ?? 0
        let sent = Int64(expected.mutations.count)
        if taken < expected.acknowledged {
            problems.append("the server has mutations up to \(taken), but acknowledged \(expected.acknowledged)")
        }
        if taken > sent { problems.append("the server has mutations up to \(taken), but only \(sent) were sent") }
        for id in expected.refused { problems.append("mutation \(id) was refused") }

        // The replay: each document's data and the position of the last mutation that wrote it.
        var model: [String: (data: JSONValue, version: Int64)] = [:]
        for (offset, mutation) in expected.mutations.prefix(Int(max(0, min(taken, sent)))).enumerated() {
            let position = Int64(offset + 1)
            if mutation.id != position { problems.append("mutation ids are not 1, 2, 3…: \(mutation.id) at \(position)") }
            switch mutation.op {
            case .put: model[mutation.docId] = (mutation.data ?? .object([:]), position)
            case .patch: model[mutation.docId] = ((model[mutation.docId]?.data ?? .object([:])).merging(mutation.data ?? .object([:])), position)
            case .delete: model[mutation.docId] = nil
            }
        }
        for (id, version) in expected.versions.sorted(by: { $0.key < $1.key }) where version != id {
            problems.append("mutation \(id) was applied at version \(version), not \(id): a mutation before it was applied twice or lost")
        }
        let found = Dictionary(server.documents.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        if found.count != server.documents.count { problems.append("a document appears twice in the pull") }
        for (id, want) in model.sorted(by: { $0.key < $1.key }) {
            guard let document = found[id] else {
                problems.append("document \(id) is missing (last written by mutation \(want.version))")
                continue
            }
            if document.data != want.data { problems.append("document \(id) holds \(document.data), the replay \(want.data)") }
            if document.version != want.version {
                problems.append("document \(id) is at version \(document.version), its last mutation is \(want.version): applied twice or lost")
            }
        }
        for id in found.keys.sorted() where model[id] == nil { problems.append("document \(id) should not exist") }
        return problems.map { Violation(userId: expected.userId, message: $0) }
    }
}
