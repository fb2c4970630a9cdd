import Foundation
import TallyStore
import Testing

/// ``DocumentRangeBounds``: the predicate of a range query's page, which both stores write as SQL.
@Suite("DocumentRangeQuery bounds", .timeLimit(.minutes(1)))
struct DocumentRangeQueryTests {
    private typealias Bound = DocumentRangeBounds.Bound

    private func query(
        from: String? = nil, to: String? = nil, descending: Bool = false, after: (rangeValue: String?, id: String)? = nil
    ) -> DocumentRangeQuery {
        DocumentRangeQuery(collection: "logs", from: from, to: to, descending: descending, after: after, limit: 10)
    }

    /// Every bound the query states, none dropped: what the page must hold.
    private func full(_ query: DocumentRangeQuery, rangeValue: String?, id: String) -> Bool {
        func less(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }
        if let from = query.from { guard let rangeValue, !less(rangeValue, from) else { return false } }
        if let to = query.to { guard let rangeValue, less(rangeValue, to) else { return false } }
        guard let after = query.after else { return true }
        guard let afterValue = after.rangeValue else {
            return rangeValue == nil && (query.descending ? less(id, after.id) : less(after.id, id))
        }
        guard let rangeValue else { return false }
        let row = Array(rangeValue.utf8) + [0] + Array(id.utf8)
        let position = Array(afterValue.utf8) + [0] + Array(after.id.utf8)
        return query.descending ? row.lexicographicallyPrecedes(position) : position.lexicographicallyPrecedes(row)
    }

    @Test("Without a cursor: from is an inclusive lower bound, to an exclusive upper one, both ways")
    func firstPage() {
        #expect(query().bounds == DocumentRangeBounds(query()))
        let bounds = query(from: "b", to: "d").bounds
        #expect(bounds.lower == Bound("b", inclusive: true) && bounds.upper == Bound("d", inclusive: false) && bounds.keyset == nil)
        let descending = query(from: "b", to: "d", descending: true).bounds
        #expect(descending.lower == bounds.lower && descending.upper == bounds.upper && descending.descending)
    }

    @Test("Ascending: the cursor replaces from when at or above it, else is dropped; to always stays")
    func ascendingCursor() {
        var bounds = query(from: "b", to: "f", after: ("c", "x")).bounds
        #expect(bounds.lower == nil && bounds.upper == Bound("f", inclusive: false) && bounds.keyset == .after(rangeValue: "c", id: "x"))
        bounds = query(from: "b", to: "f", after: ("b", "x")).bounds
        #expect(bounds.lower == nil && bounds.keyset == .after(rangeValue: "b", id: "x"), "at from, the cursor is tighter")
        bounds = query(from: "b", to: "f", after: ("a", "x")).bounds
        #expect(bounds.lower == Bound("b", inclusive: true) && bounds.keyset == nil, "below from, the bound is tighter")
        bounds = query(to: "f", after: ("a", "x")).bounds
        #expect(bounds.lower == nil && bounds.keyset == .after(rangeValue: "a", id: "x"))
    }

    @Test("Descending: the cursor replaces to when below it, else is dropped; from always stays")
    func descendingCursor() {
        var bounds = query(from: "b", to: "f", descending: true, after: ("c", "x")).bounds
        #expect(bounds.upper == nil && bounds.lower == Bound("b", inclusive: true) && bounds.keyset == .after(rangeValue: "c", id: "x"))
        bounds = query(from: "b", to: "f", descending: true, after: ("f", "x")).bounds
        #expect(bounds.upper == Bound("f", inclusive: false) && bounds.keyset == nil, "at to (exclusive), the bound is tighter")
        bounds = query(from: "b", to: "f", descending: true, after: ("g", "x")).bounds
        #expect(bounds.upper == Bound("f", inclusive: false) && bounds.keyset == nil)
    }

    @Test("A cursor without a range value pages by id among rows without one, and keeps both bounds")
    func idCursor() {
        let bounds = query(from: "b", after: (nil, "k")).bounds
        #expect(bounds.keyset == .afterId("k") && bounds.lower == Bound("b", inclusive: true))
        #expect(query(after: (nil, "k")).bounds.admits(rangeValue: nil, id: "l"))
        #expect(!query(after: (nil, "k")).bounds.admits(rangeValue: nil, id: "k"))
        #expect(query(descending: true, after: (nil, "k")).bounds.admits(rangeValue: nil, id: "j"))
        #expect(!query(after: (nil, "k")).bounds.admits(rangeValue: "z", id: "z"))
    }

    @Test("Edges: bounds equal or crossed admit nothing; a cursor at the last row admits nothing after it")
    func edges() {
        for value in ["a", "b", "c"] {
            #expect(!query(from: "b", to: "b").bounds.admits(rangeValue: value, id: "x"))
            #expect(!query(from: "c", to: "b", descending: true).bounds.admits(rangeValue: value, id: "x"))
        }
        let last = query(from: "a", to: "c", after: ("b", "z")).bounds
        #expect(!last.admits(rangeValue: "b", id: "z") && last.admits(rangeValue: "b", id: "zz") && !last.admits(rangeValue: "c", id: "a"))
        // Equal range values across a page boundary: the id decides.
        let tie = query(after: ("b", "m")).bounds
        #expect(tie.admits(rangeValue: "b", id: "n") && !tie.admits(rangeValue: "b", id: "l") && tie.admits(rangeValue: "c", id: "a"))
    }

    @Test("Byte order, not Swift's: a decomposed é sorts by its bytes")
    func byteOrder() {
        let composed = "\u{e9}"  // C3 A9
        let decomposed = "e\u{301}"  // 65 CC 81: Swift calls it equal to `composed`
        #expect(composed == decomposed)
        #expect(DocumentRangeBounds.bytes(decomposed, precede: composed))
        let bounds = query(from: composed, after: (decomposed, "x")).bounds
        #expect(bounds.lower == Bound(composed, inclusive: true) && bounds.keyset == nil, "the cursor is below from by bytes")
        #expect(!bounds.admits(rangeValue: decomposed, id: "y"))
    }

    @Test("Dropping the looser bound changes nothing: the bounds admit exactly what every stated bound admits")
    func sameAsFull() {
        let values: [String?] = [nil, "a", "b", "bb", "c", "d"]
        let ids = ["", "a", "m", "z"]
        for from in values {
            for to in values {
                for descending in [false, true] {
                    for afterValue in values {
                        for afterId in ids {
                            let q = query(from: from, to: to, descending: descending, after: (afterValue, afterId))
                            for rangeValue in values {
                                for id in ids {
                                    #expect(
                                        q.bounds.admits(rangeValue: rangeValue, id: id) == full(q, rangeValue: rangeValue, id: id),
                                        "\(q) on (\(rangeValue ?? "NULL"), \(id))")
                                }
                            }
                        }
                    }
                    let first = query(from: from, to: to, descending: descending)
                    for rangeValue in values {
                        #expect(first.bounds.admits(rangeValue: rangeValue, id: "m") == full(first, rangeValue: rangeValue, id: "m"))
                    }
                }
            }
        }
    }

    @Test("The page order: range value then id, reversed when descending")
    func order() {
        let ascending = query().bounds
        #expect(ascending.orders(("a", "z"), before: ("b", "a")))
        #expect(ascending.orders(("b", "a"), before: ("b", "b")))
        #expect(!ascending.orders(("b", "b"), before: ("b", "b")))
        let descending = query(descending: true).bounds
        #expect(descending.orders(("b", "a"), before: ("a", "z")))
        #expect(descending.orders(("b", "b"), before: ("b", "a")))
    }
}
