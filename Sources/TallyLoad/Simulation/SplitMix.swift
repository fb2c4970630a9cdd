/// A small seeded generator (SplitMix64), so a run's choices repeat with its seed.
public struct SplitMix: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator seeded with `seed`.
    public init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform draw in [0, 1).
    public mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }

    /// A random lower-case hex string of `length` characters.
    public mutating func hex(_ length: Int) -> String {
        let digits = Array("0123456789abcdef")
        return String((0..<length).map { _ in digits[Int(next() & 15)] })
    }
}
