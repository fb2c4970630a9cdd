/// The total conversion of a floating-point number to an integer: `Int(_:)` and `Int64(_:)` trap on NaN, ±∞ and
/// anything beyond the type's range; this never does. Every conversion of a `Double` in the server's modules goes
/// through it or through `init(exactly:)` (which refuses: `nil`), as `TotalConversionsTests` checks.
extension FixedWidthInteger {
    /// `value` rounded by `rule` (toward zero, as `init(_:)` does, unless told), clamped to the type's range; NaN is 0.
    @inlinable
    public init(saturating value: Double, rounding rule: FloatingPointRoundingRule = .towardZero) {
        let rounded = value.rounded(rule)
        if let exact = Self(exactly: rounded) {
            self = exact
        } else {
            self = rounded.isNaN ? 0 : rounded < 0 ? .min : .max
        }
    }
}
