import Foundation
import TallyStore
import Testing

/// The push rules both stores run (``PushTaking``, ``TakenMutation``): each mutation taken at most once and in
/// order, whatever it answers.
@Suite("Push taking", .timeLimit(.minutes(1)))
struct PushTakingTests {
    private static let logs = CollectionSpec(name: "logs")
    private static func mutation(_ id: Int64) -> ClientMutation {
        ClientMutation(id: id, mutation: DocumentMutation(collection: logs, docId: "d\(id)", operation: .delete))
    }
    private static func record(_ id: String, version: Int64) -> DocumentRecord {
        DocumentRecord(
            collection: "logs", id: id, data: Array("{}".utf8), rangeValue: nil, version: version,
            updatedAt: Date(timeIntervalSince1970: 0), deleted: false)
    }

    @Test("Ids at or below the client's last are duplicates and are not taken; the rest advance the last id in order")
    func duplicatesAreSkipped() {
        var taking = PushTaking(after: 3, count: 5)
        var taken: [Int64] = []
        for pushed in [2, 3, 4, 4, 6].map(Self.mutation) where taking.isNew(pushed) {
            taken.append(pushed.id)
            taking.record(.applied(Self.record(pushed.mutation.docId, version: pushed.id), created: true))
        }
        #expect(taken == [4, 6])
        #expect(taking.lastMutationId == 6)
        let outcome = taking.outcome(charged: nil)
        #expect(outcome.lastMutationId == 6)
        #expect(outcome.results == [.duplicate, .duplicate, .applied(Self.record("d4", version: 4)), .duplicate, .applied(Self.record("d6", version: 6))])
    }

    @Test("A conflict or a refusal is final: it is answered and still advances the client's last id")
    func conflictsAndRefusalsAreTaken() {
        var taking = PushTaking(after: 0, count: 3)
        let current = Self.record("d1", version: 9)
        let answers: [TakenMutation] = [
            .conflict(current: current), .refused(StoreError(.documentTooLarge)), .refused(StoreError(.insufficientTokens)),
        ]
        for (pushed, answer) in zip([1, 2, 3].map(Self.mutation), answers) where taking.isNew(pushed) { taking.record(answer) }
        #expect(taking.lastMutationId == 3)
        #expect(taking.results == [.conflict(current: current), .rejected(.documentTooLarge, state: nil), .rejected(.insufficientTokens, state: nil)])
        // A second push of the same mutations takes none of them.
        var again = PushTaking(after: taking.lastMutationId, count: 3)
        for pushed in [1, 2, 3].map(Self.mutation) where again.isNew(pushed) { Issue.record("mutation \(pushed.id) taken twice") }
        #expect(again.results == [.duplicate, .duplicate, .duplicate] && again.lastMutationId == 3)
    }

    @Test("Only the account's inability to pay is a metered create's answer; other store errors fail the write")
    func paymentRefusals() {
        #expect(StoreError(.insufficientTokens).refusesPayment && StoreError(.quotaExhausted).refusesPayment)
        #expect(![StoreError.Code.unavailable, .userNotFound, .invalidInput, .idempotencyKeyInUse].contains { StoreError($0).refusesPayment })
    }
}
