import Foundation
import TallyAPI
import TallyLoad
import Testing

/// The sync books checker on hand-made books: balanced ones pass, and each way of losing or doubling a
/// mutation is caught with its own message.
@Suite("Sync books checker", .timeLimit(.minutes(1)))
struct SyncBooksCheckerTests {
    static let day1: JSONValue = .object(["date": .string("2027-01-01"), "done": .bool(true), "note": .string("m1")])

    /// Three mutations: put d1, patch d1, put d2 (then a delete of d2 where asked), all acknowledged.
    static func books(deleting: Bool = false) -> (SyncExpectation, SyncServerState) {
        var expected = SyncExpectation(userId: "u1", clientId: "c1")
        expected.mutations = [
            SyncMutation(id: 1, op: .put, collection: "load_logs", docId: "d1", data: day1),
            SyncMutation(id: 2, op: .patch, collection: "load_logs", docId: "d1", data: .object(["done": .bool(false)])),
            SyncMutation(id: 3, op: .put, collection: "load_logs", docId: "d2", data: .object(["date": .string("2027-01-02")])),
        ]
        if deleting { expected.mutations.append(SyncMutation(id: 4, op: .delete, collection: "load_logs", docId: "d2")) }
        expected.acknowledged = Int64(expected.mutations.count)
        expected.versions = [1: 1, 2: 2, 3: 3]
        var documents = [
            document("d1", version: 2, data: .object(["date": .string("2027-01-01"), "done": .bool(false), "note": .string("m1")])),
        ]
        if !deleting { documents.append(document("d2", version: 3, data: .object(["date": .string("2027-01-02")]))) }
        return (expected, SyncServerState(documents: documents, lastMutationId: expected.acknowledged))
    }

    static func document(_ id: String, version: Int64, data: JSONValue) -> Document {
        Document(id: id, collection: "load_logs", data: data, version: version, updatedAt: Date(timeIntervalSince1970: 0), deleted: false)
    }

    static func messages(_ expected: SyncExpectation, _ server: SyncServerState) -> [String] {
        SyncBooksChecker.check(expected, against: server).map(\.message)
    }

    @Test func balancedBooksPass() {
        let (expected, server) = Self.books()
        #expect(Self.messages(expected, server).isEmpty)
        let (withDelete, afterDelete) = Self.books(deleting: true)
        #expect(Self.messages(withDelete, afterDelete).isEmpty)
    }

    @Test func aMutationAppliedTwiceShiftsTheVersionsAfterIt() {
        let (expected, original) = Self.books()
        var server = original
        // The patch applied twice: d1 at 3, d2 at 4.
        server.documents = [
            Self.document("d1", version: 3, data: original.documents[0].data), Self.document("d2", version: 4, data: original.documents[1].data),
        ]
        #expect(Self.messages(expected, server) == [
            "document d1 is at version 3, its last mutation is 2: applied twice or lost",
            "document d2 is at version 4, its last mutation is 3: applied twice or lost",
        ])
        var told = expected
        told.versions[3] = 4
        #expect(Self.messages(told, original).contains("mutation 3 was applied at version 4, not 3: a mutation before it was applied twice or lost"))
    }

    @Test func anAcknowledgedMutationMissingIsCaught() {
        let (expected, original) = Self.books()
        var server = original
        server.documents.removeLast()
        #expect(Self.messages(expected, server) == ["document d2 is missing (last written by mutation 3)"])
        server = original
        server.lastMutationId = 2
        #expect(Self.messages(expected, server).first == "the server has mutations up to 2, but acknowledged 3")
    }

    @Test func aDocumentThatShouldNotExistOrHoldsOtherDataIsCaught() {
        let (expected, original) = Self.books(deleting: true)
        var server = original
        server.documents.append(Self.document("d2", version: 3, data: .object(["date": .string("2027-01-02")])))
        #expect(Self.messages(expected, server) == ["document d2 should not exist"])
        let (balanced, kept) = Self.books()
        server = kept
        server.documents[0].data = Self.day1
        #expect(Self.messages(balanced, server).count == 1)
        #expect(Self.messages(balanced, server).first?.hasPrefix("document d1 holds") == true)
    }

    @Test func refusalsAndMutationsNeverSentAreCaught() {
        var (expected, server) = Self.books()
        expected.refused = [2]
        #expect(Self.messages(expected, server) == ["mutation 2 was refused"])
        (expected, server) = Self.books()
        server.lastMutationId = 5
        #expect(Self.messages(expected, server).first == "the server has mutations up to 5, but only 3 were sent")
    }
}
