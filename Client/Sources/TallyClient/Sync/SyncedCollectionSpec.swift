/// A synced collection as the server declares it (`collections:` in its configuration): the app lists them in
/// ``ClientConfiguration/collections`` so it can write offline, at first launch too.
public struct SyncedCollectionSpec: Sendable, Hashable {
    /// The collection's name, e.g. `habit_logs`.
    public var name: String
    /// The top-level string field range queries order by (e.g. `date`), if the collection has one.
    public var rangeKey: String?

    /// Declares the collection `name`, with its range key if it has one.
    public init(_ name: String, rangeKey: String? = nil) {
        self.name = name
        self.rangeKey = rangeKey
    }
}
