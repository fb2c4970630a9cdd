import Foundation

/// The predicate of one page of a ``DocumentRangeQuery``, decided once for both stores, which only turn it into SQL:
/// the bounds on the range value and the keyset position the page starts after.
///
/// A range value compares byte by byte (its UTF-8; SQLite's `BINARY`, PostgreSQL's `COLLATE "C"`). Paging moves one
/// bound (`from` ascending, `to` descending) and the cursor says it again, tighter or looser: only the tighter of
/// the two is kept, so the index scan starts there (the other would filter nothing). The far bound is always kept.
/// After a position without a range value (a collection without a range key, whose values are all NULL), the keyset
/// is the id alone among the rows without one.
public struct DocumentRangeBounds: Sendable, Hashable {
    /// A bound on the range value.
    public struct Bound: Sendable, Hashable {
        /// The range value bounded by.
        public var value: String
        /// Whether a range value equal to ``value`` is within.
        public var inclusive: Bool

        /// A bound.
        public init(_ value: String, inclusive: Bool) {
            self.value = value
            self.inclusive = inclusive
        }
    }

    /// Where the page starts: strictly beyond a position, in the query's order.
    public enum Keyset: Sendable, Hashable {
        /// Rows whose `(range_value, id)` is beyond `(rangeValue, id)` (rows without a range value are not).
        case after(rangeValue: String, id: String)
        /// Rows without a range value whose id is beyond `id`.
        case afterId(String)
    }

    /// The lowest range value within (`nil`: unbounded).
    public var lower: Bound?
    /// The highest range value within (`nil`: unbounded).
    public var upper: Bound?
    /// The position the page starts after (`nil`: the first page).
    public var keyset: Keyset?
    /// Whether the order is newest first: "beyond" means below.
    public var descending: Bool

    /// The bounds of `query`'s page (see the type's comment for which are kept).
    public init(_ query: DocumentRangeQuery) {
        descending = query.descending
        lower = query.from.map { Bound($0, inclusive: true) }
        upper = query.to.map { Bound($0, inclusive: false) }
        guard let after = query.after else { return }
        guard let rangeValue = after.rangeValue else {
            keyset = .afterId(after.id)
            return
        }
        // The position's row is at `rangeValue`, and the keyset admits rows beyond it only.
        if descending {
            // Rows ≤ rangeValue; the bound admits rows below `to`: the keyset is tighter when rangeValue < to.
            if let to = query.to, !Self.bytes(rangeValue, precede: to) { return }
            upper = nil
        } else {
            // Rows ≥ rangeValue; the bound admits rows ≥ `from`: the keyset is tighter when rangeValue ≥ from.
            if let from = query.from, Self.bytes(rangeValue, precede: from) { return }
            lower = nil
        }
        keyset = .after(rangeValue: rangeValue, id: after.id)
    }

    /// Whether a live document with `rangeValue` and `id` is on the page or a later one: the predicate each store
    /// writes in SQL, here over values (`nil` range values compare as SQL's NULL: outside any bound).
    public func admits(rangeValue: String?, id: String) -> Bool {
        if let lower {
            guard let rangeValue, lower.inclusive ? !Self.bytes(rangeValue, precede: lower.value) : Self.bytes(lower.value, precede: rangeValue)
            else { return false }
        }
        if let upper {
            guard let rangeValue, upper.inclusive ? !Self.bytes(upper.value, precede: rangeValue) : Self.bytes(rangeValue, precede: upper.value)
            else { return false }
        }
        switch keyset {
        case nil:
            return true
        case .afterId(let after):
            guard rangeValue == nil else { return false }
            return descending ? Self.bytes(id, precede: after) : Self.bytes(after, precede: id)
        case .after(let afterValue, let afterId):
            guard let rangeValue else { return false }
            let (row, position) = ((rangeValue, id), (afterValue, afterId))
            return descending ? Self.key(row, precedes: position) : Self.key(position, precedes: row)
        }
    }

    /// The order of a page over values: `(rangeValue, id)` byte by byte, reversed when descending; whether `lhs` comes
    /// before `rhs`. A NULL range value sorts first here (SQLite's order; PostgreSQL's is last), which never shows:
    /// the live rows of a collection all have a range value (it has a range key) or none has.
    public func orders(_ lhs: (rangeValue: String?, id: String), before rhs: (rangeValue: String?, id: String)) -> Bool {
        func ascending(_ a: (String?, String), _ b: (String?, String)) -> Bool {
            switch (a.0, b.0) {
            case (nil, nil): return Self.bytes(a.1, precede: b.1)
            case (nil, _): return true
            case (_, nil): return false
            case (let x?, let y?): return Self.key((x, a.1), precedes: (y, b.1))
            }
        }
        return descending ? ascending(rhs, lhs) : ascending(lhs, rhs)
    }

    /// Whether `a`'s UTF-8 comes before `b`'s, byte by byte.
    public static func bytes(_ a: String, precede b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }

    /// Whether the key `a` comes before `b`: range value, then id, byte by byte.
    private static func key(_ a: (String, String), precedes b: (String, String)) -> Bool {
        if a.0.utf8.elementsEqual(b.0.utf8) { return bytes(a.1, precede: b.1) }
        return bytes(a.0, precede: b.0)
    }
}

extension DocumentRangeQuery {
    /// The predicate of this query's page (``DocumentRangeBounds``), which both stores write as SQL.
    public var bounds: DocumentRangeBounds { DocumentRangeBounds(self) }
}
