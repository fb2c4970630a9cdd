import Foundation
import TallyServer
import TallyStore
import Testing

/// The `collections:` and `tombstoneRetentionDays:` keys of the configuration file.
@Suite("Sync configuration", .timeLimit(.minutes(1)))
struct SyncConfigurationTests {
    static let catalog = try! Catalog(
        signupGrant: 0, quotas: [QuotaSpec(name: "messages", daily: 20)],
        actions: [ActionSpec(name: "chat.message", quota: "messages", tokens: 1), ActionSpec(name: "ai.query", tokens: 3)])

    @Test("No collections by default; each declared one is resolved, defaults filled in, in file order")
    func parses() throws {
        let defaults = SyncConfiguration()
        #expect(defaults.collections.isEmpty && defaults.tombstoneRetentionDays == 30)
        #expect(try TallyConfiguration(file: "guestSignupsPerIPPerHour: 5\n", catalog: Self.catalog).sync.collections.isEmpty)
        let sync = try TallyConfiguration(
            file: """
                signupGrant: 0
                collections:
                  - {name: habit_logs, rangeKey: date}
                  - {name: chat_messages, rangeKey: sentAt, action: chat.message, maxDocumentBytes: 262144}
                  - {name: answers, action: ai.query, maxDocuments: 1}
                tombstoneRetentionDays: 7
                """, catalog: Self.catalog
        ).sync
        #expect(sync.tombstoneRetentionDays == 7)
        #expect(sync.collections == [
            CollectionSpec(name: "habit_logs", rangeKey: "date"),
            CollectionSpec(
                name: "chat_messages", rangeKey: "sentAt", maxDocumentBytes: 262_144,
                action: ActionSpec(name: "chat.message", quota: "messages", tokens: 1), quotaLimit: 20),
            CollectionSpec(name: "answers", maxDocuments: 1, action: ActionSpec(name: "ai.query", tokens: 3), quotaLimit: nil),
        ])
        #expect(sync.collections[0].maxDocumentBytes == 16_384 && sync.collections[0].maxDocuments == 10_000)
        // JSON is YAML too.
        let json = try TallyConfiguration(file: #"{"collections": [{"name": "profile"}]}"#, catalog: Self.catalog).sync
        #expect(json.collections.map(\.name) == ["profile"] && json.tombstoneRetentionDays == 30)
    }

    @Test("The per-user storage budget: 20,000 documents, 64 MiB, 5,000 client ids by default; each key set alone; below 1 refused")
    func budget() throws {
        #expect(SyncConfiguration().budget == SyncBudget(documents: 20_000, bytes: 64 << 20, clientIds: 5_000))
        let set = try TallyConfiguration(file: "maxStoredDocumentsPerUser: 500\nmaxClientIdsPerUser: 3\n", catalog: Self.catalog).sync
        #expect(set.budget == SyncBudget(documents: 500, bytes: 64 << 20, clientIds: 3))
        for key in ["maxStoredDocumentsPerUser", "maxStoredBytesPerUser", "maxClientIdsPerUser"] {
            #expect(throws: ConfigurationError.self, "\(key)") { try TallyConfiguration(file: "\(key): 0\n", catalog: Self.catalog) }
        }
    }

    @Test("Bad collections are refused with a message naming what to fix")
    func refuses() {
        let cases = [
            ("collections: [{name: Habits}]", "'Habits' is not a valid name"),
            ("collections: [{name: 9lives}]", "'9lives'"),
            ("collections: [{name: \(String(repeating: "a", count: 65))}]", "not a valid name"),
            ("collections: [{name: notes}, {name: notes}]", "'notes' is declared twice"),
            ("collections: [{name: notes, action: chat.mesage}]", "no action named 'chat.mesage'"),
            ("collections: [{name: notes, maxDocumentBytes: 262145}]", "maxDocumentBytes must be between 1 and 262144"),
            ("collections: [{name: notes, maxDocumentBytes: 0}]", "maxDocumentBytes"),
            ("collections: [{name: notes, maxDocuments: 0}]", "maxDocuments must be at least 1"),
            ("collections: [{name: notes, rangeKey: \"\"}]", "rangeKey"),
            ("collections: [{name: notes, maxDocs: 5}]", #"unknown key "maxDocs" in collections[0]; known keys: name, rangeKey, maxDocumentBytes, maxDocuments, action"#),
            ("collections: [{rangeKey: date}]", #"missing key "name" in collections[0]"#),
            ("collections: {name: notes}", "collections: expected a list"),
            ("tombstoneRetentionDays: 0", "tombstoneRetentionDays must be at least 1"),
        ]
        for (yaml, message) in cases {
            do {
                let parsed = try TallyConfiguration(file: yaml, catalog: Self.catalog)
                Issue.record("accepted: \(yaml) → \(parsed.sync.collections)")
            } catch let error as ConfigurationError {
                #expect(error.description.contains(message), "\(yaml): \(error.description)")
            } catch {
                Issue.record("\(yaml): \(error)")
            }
        }
    }
}
