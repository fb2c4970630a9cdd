import Foundation
import TallyStore

/// Synced collections: the `collections:`, `tombstoneRetentionDays:` and per-user budget keys of the configuration
/// file (`TALLY_CONFIG`). The default declares no collection.
public struct SyncConfiguration: Sendable {
    /// The declared collections, in file order, their actions resolved against the catalog.
    public var collections: [CollectionSpec] = []
    /// How long tombstones (deleted documents) are kept for pulls; an older pull cursor gets `410 resync_required`.
    public var tombstoneRetentionDays = 30
    /// What one user may keep: documents (tombstones included), bytes of data and sync client ids
    /// (`maxStoredDocumentsPerUser`, `maxStoredBytesPerUser`, `maxClientIdsPerUser`).
    public var budget = SyncBudget()

    /// No collections, tombstones kept 30 days.
    public init() {}

    /// The collections the file declares (``CollectionEntry``), each `action` one of `catalog`'s, whose quota's
    /// daily limit it then draws on; `tombstoneRetentionDays` when given.
    ///
    /// ```yaml
    /// collections:
    ///   - {name: habit_logs, rangeKey: date}
    ///   - {name: chat_messages, rangeKey: sentAt, action: chat.message, maxDocumentBytes: 65536}
    ///   - {name: profile, maxDocuments: 1}
    /// tombstoneRetentionDays: 30
    /// maxStoredDocumentsPerUser: 20000   # documents and tombstones, across collections
    /// maxStoredBytesPerUser: 67108864    # bytes of their data
    /// maxClientIdsPerUser: 5000
    /// ```
    init(
        collections entries: [CollectionEntry], tombstoneRetentionDays: Int?, maxStoredDocumentsPerUser: Int?, maxStoredBytesPerUser: Int?,
        maxClientIdsPerUser: Int?, catalog: Catalog
    ) throws {
        var names = Set<String>()
        collections = try entries.enumerated().map { index, entry in
            let spec = try entry.spec(catalog: catalog, place: "collections[\(index)]")
            guard names.insert(spec.name).inserted else { throw ConfigurationError("collections[\(index)]: '\(spec.name)' is declared twice") }
            return spec
        }
        self.tombstoneRetentionDays = tombstoneRetentionDays ?? self.tombstoneRetentionDays
        guard self.tombstoneRetentionDays >= 1 else { throw ConfigurationError("tombstoneRetentionDays must be at least 1") }
        budget = SyncBudget(
            documents: maxStoredDocumentsPerUser ?? budget.documents, bytes: maxStoredBytesPerUser ?? budget.bytes,
            clientIds: maxClientIdsPerUser ?? budget.clientIds)
        guard budget.documents >= 1, budget.bytes >= 1, budget.clientIds >= 1 else {
            throw ConfigurationError("maxStoredDocumentsPerUser, maxStoredBytesPerUser and maxClientIdsPerUser must be at least 1")
        }
    }

    /// How long tombstones are kept, in seconds.
    var tombstoneRetention: TimeInterval { TimeInterval(tombstoneRetentionDays) * 86_400 }

    /// One collection as written.
    struct CollectionEntry: Codable, Equatable {
        var name: String
        var rangeKey: String?
        var maxDocumentBytes: Int?
        var maxDocuments: Int?
        var action: String?

        /// The entry that declares exactly `spec`.
        init(effective spec: CollectionSpec) {
            (name, rangeKey, action) = (spec.name, spec.rangeKey, spec.action?.name)
            (maxDocumentBytes, maxDocuments) = (spec.maxDocumentBytes, spec.maxDocuments)
        }

        func spec(catalog: Catalog, place: String) throws -> CollectionSpec {
            guard CollectionSpec.isValidName(name) else {
                throw ConfigurationError("\(place): '\(name)' is not a valid name ([a-z][a-z0-9_.-]{0,63})")
            }
            if let rangeKey, rangeKey.isEmpty || rangeKey.utf8.count > 128 {
                throw ConfigurationError("\(place) (\(name)): rangeKey must be 1 to 128 bytes")
            }
            let bytes = maxDocumentBytes ?? CollectionSpec.defaultMaxDocumentBytes
            guard (1...CollectionSpec.maxDocumentBytesLimit).contains(bytes) else {
                throw ConfigurationError("\(place) (\(name)): maxDocumentBytes must be between 1 and \(CollectionSpec.maxDocumentBytesLimit)")
            }
            let count = maxDocuments ?? CollectionSpec.defaultMaxDocuments
            guard count >= 1 else { throw ConfigurationError("\(place) (\(name)): maxDocuments must be at least 1") }
            var spec = CollectionSpec(name: name, rangeKey: rangeKey, maxDocumentBytes: bytes, maxDocuments: count)
            if let action {
                guard let resolved = catalog.action(named: action) else {
                    throw ConfigurationError(
                        "\(place) (\(name)): no action named '\(action)' (actions: \(catalog.actions.map(\.name).joined(separator: ", ")))")
                }
                spec.action = resolved
                spec.quotaLimit = resolved.quota.flatMap { catalog.quota(named: $0)?.daily }
            }
            return spec
        }
    }
}
