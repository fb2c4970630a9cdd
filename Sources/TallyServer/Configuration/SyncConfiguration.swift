import Foundation
import TallyStore
import Yams

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

    /// Reads the sync keys of a configuration file (YAML or JSON); a collection's `action` must be one of
    /// `catalog`'s, whose quota's daily limit it then draws on. Unknown keys inside a collection are refused
    /// (a misspelt limit would silently not apply).
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
    public init(yaml text: String, catalog: Catalog) throws {
        struct File: Decodable {
            var collections: [Entry]?
            var tombstoneRetentionDays: Int?
            var maxStoredDocumentsPerUser, maxStoredBytesPerUser, maxClientIdsPerUser: Int?
        }
        let file: File
        do {
            file = try YAMLDecoder().decode(File.self, from: text)
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw ConfigurationError("collections: not of the expected shape ({name, rangeKey?, maxDocumentBytes?, maxDocuments?, action?}): \(error)")
        }
        var names = Set<String>()
        collections = try (file.collections ?? []).map { entry in
            let spec = try entry.spec(catalog: catalog)
            guard names.insert(spec.name).inserted else { throw ConfigurationError("collections: '\(spec.name)' is declared twice") }
            return spec
        }
        tombstoneRetentionDays = file.tombstoneRetentionDays ?? 30
        guard tombstoneRetentionDays >= 1 else { throw ConfigurationError("tombstoneRetentionDays must be at least 1") }
        budget = SyncBudget(
            documents: file.maxStoredDocumentsPerUser ?? budget.documents, bytes: file.maxStoredBytesPerUser ?? budget.bytes,
            clientIds: file.maxClientIdsPerUser ?? budget.clientIds)
        guard budget.documents >= 1, budget.bytes >= 1, budget.clientIds >= 1 else {
            throw ConfigurationError("maxStoredDocumentsPerUser, maxStoredBytesPerUser and maxClientIdsPerUser must be at least 1")
        }
    }

    /// How long tombstones are kept, in seconds.
    var tombstoneRetention: TimeInterval { TimeInterval(tombstoneRetentionDays) * 86_400 }

    /// One collection as written.
    private struct Entry: Decodable {
        var name: String
        var rangeKey: String?
        var maxDocumentBytes: Int?
        var maxDocuments: Int?
        var action: String?

        private enum CodingKeys: String, CodingKey, CaseIterable {
            case name, rangeKey, maxDocumentBytes, maxDocuments, action
        }

        init(from decoder: any Decoder) throws {
            try ConfigurationError.refuseUnknownKeys(in: decoder, known: CodingKeys.allCases.map(\.rawValue), where: "in collections")
            let container = try decoder.container(keyedBy: CodingKeys.self)
            name = try container.decode(String.self, forKey: .name)
            rangeKey = try container.decodeIfPresent(String.self, forKey: .rangeKey)
            maxDocumentBytes = try container.decodeIfPresent(Int.self, forKey: .maxDocumentBytes)
            maxDocuments = try container.decodeIfPresent(Int.self, forKey: .maxDocuments)
            action = try container.decodeIfPresent(String.self, forKey: .action)
        }

        func spec(catalog: Catalog) throws -> CollectionSpec {
            guard CollectionSpec.isValidName(name) else {
                throw ConfigurationError("collections: '\(name)' is not a valid name ([a-z][a-z0-9_.-]{0,63})")
            }
            if let rangeKey, rangeKey.isEmpty || rangeKey.utf8.count > 128 {
                throw ConfigurationError("collections: \(name): rangeKey must be 1 to 128 bytes")
            }
            let bytes = maxDocumentBytes ?? CollectionSpec.defaultMaxDocumentBytes
            guard (1...CollectionSpec.maxDocumentBytesLimit).contains(bytes) else {
                throw ConfigurationError("collections: \(name): maxDocumentBytes must be between 1 and \(CollectionSpec.maxDocumentBytesLimit)")
            }
            let count = maxDocuments ?? CollectionSpec.defaultMaxDocuments
            guard count >= 1 else { throw ConfigurationError("collections: \(name): maxDocuments must be at least 1") }
            var spec = CollectionSpec(name: name, rangeKey: rangeKey, maxDocumentBytes: bytes, maxDocuments: count)
            if let action {
                guard let resolved = catalog.action(named: action) else {
                    throw ConfigurationError(
                        "collections: \(name): no action named '\(action)' (actions: \(catalog.actions.map(\.name).joined(separator: ", ")))")
                }
                spec.action = resolved
                spec.quotaLimit = resolved.quota.flatMap { catalog.quota(named: $0)?.daily }
            }
            return spec
        }
    }
}
