import TallyLoad

/// The seeded generator of the load harness (SplitMix64), for randomized tests: a failure names the seed and
/// the inputs that reproduce it.
public typealias SplitMix64 = SplitMix
