import Testing

/// The stores every store-backed test runs on: parameterized tests take `StoreKind.allCases`, so both cases
/// always exist; a PostgreSQL case without a database is skipped visibly by ``postgresURL(sourceLocation:)``.
public enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// The embedded store (a fresh file per test).
    case sqlite
    /// The scale-out store, on the database `scripts/test` provisions.
    case postgres

    public var testDescription: String { rawValue }
}

/// A refusal of a test harness itself (not of the code under test).
public struct HarnessError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
