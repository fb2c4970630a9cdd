import Foundation
import Testing
@testable import TallyClient

@Suite(.timeLimit(.minutes(1))) struct CacheStoreTests {
    enum Kind: String, CaseIterable, CustomTestStringConvertible {
        case memory, sqlite
        var testDescription: String { rawValue }
    }

    /// A store of `kind`, with the temporary directory that holds its file (if any).
    private struct Fixture {
        let store: any CacheStore
        let directory: URL

        init(_ kind: Kind) throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("CacheStoreTests-\(UUID().uuidString)")
            switch kind {
            case .memory: store = MemoryCacheStore()
            case .sqlite: store = try SQLiteCacheStore(path: directory.appendingPathComponent("cache.sqlite").path)
            }
        }

        func cleanUp() { try? FileManager.default.removeItem(at: directory) }
    }

    private static let date = Date(timeIntervalSince1970: 1_750_000_000.25)

    private static func entry(_ key: String, _ text: String, etag: String? = nil, at date: Date = date) -> PersistedEntry {
        PersistedEntry(key: key, data: Data(text.utf8), etag: etag, confirmedAt: date)
    }

    @Test(arguments: Kind.allCases) func saveReplaceLoad(kind: Kind) throws {
        let fixture = try Fixture(kind)
        defer { fixture.cleanUp() }
        let store = fixture.store

        #expect(try store.entries(userId: "u1").isEmpty)
        let wallet = Self.entry("wallet", #"{"available":5}"#, etag: "\"v1\"")
        let quotas = Self.entry("quotas", "[]")
        let empty = PersistedEntry(key: "empty", data: Data(), etag: nil, confirmedAt: Self.date)
        try store.save(wallet, userId: "u1")
        try store.save(quotas, userId: "u1")
        try store.save(empty, userId: "u1")
        #expect(try store.entries(userId: "u1") == [empty, quotas, wallet])

        let newer = Self.entry("wallet", #"{"available":7}"#, etag: "\"v2\"", at: Self.date.addingTimeInterval(60))
        try store.save(newer, userId: "u1")
        let noEtag = Self.entry("quotas", "[1]")
        try store.save(noEtag, userId: "u1")
        #expect(try store.entries(userId: "u1") == [empty, noEtag, newer])
    }

    @Test(arguments: Kind.allCases) func namespacesByUserAndRemoves(kind: Kind) throws {
        let fixture = try Fixture(kind)
        defer { fixture.cleanUp() }
        let store = fixture.store

        try store.save(Self.entry("wallet", "one"), userId: "u1")
        try store.save(Self.entry("quotas", "one"), userId: "u1")
        try store.save(Self.entry("wallet", "two"), userId: "u2")
        #expect(try store.entries(userId: "u1").map(\.key) == ["quotas", "wallet"])
        #expect(try store.entries(userId: "u2") == [Self.entry("wallet", "two")])

        try store.remove(key: "wallet", userId: "u1")
        try store.remove(key: "missing", userId: "u1")
        #expect(try store.entries(userId: "u1").map(\.key) == ["quotas"])
        #expect(try store.entries(userId: "u2").map(\.key) == ["wallet"])

        try store.removeAll(userId: "u1")
        #expect(try store.entries(userId: "u1").isEmpty)
        #expect(try store.entries(userId: "u2") == [Self.entry("wallet", "two")])

        try store.save(Self.entry("wallet", "three"), userId: "u3")
        try store.removeEverything()
        #expect(try store.entries(userId: "u2").isEmpty)
        #expect(try store.entries(userId: "u3").isEmpty)
    }

    @Test func sqliteValuesSurviveReopening() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("CacheStoreTests-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("nested/cache.sqlite").path
        let saved = [Self.entry("a", "alpha", etag: "\"1\""), Self.entry("b", "beta")]

        do {
            let store = try SQLiteCacheStore(path: path)
            for entry in saved { try store.save(entry, userId: "u1") }
        }
        let reopened = try SQLiteCacheStore(path: path)
        #expect(try reopened.entries(userId: "u1") == saved)

        let permissions = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(permissions == 0o600)
    }

    @Test func sqliteSignOutLeavesNothingOnDisk() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("CacheStoreTests-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("cache.sqlite").path
        let marker = "MARKER-\(UUID().uuidString)"
        let store = try SQLiteCacheStore(path: path)

        // Enough rows and bytes to spread over several pages, plus another user who stays.
        for i in 0..<50 {
            let text = String(repeating: "\(marker) secret balance \(i) ", count: 40)
            try store.save(Self.entry("\(marker)-key-\(i)", text, etag: "\"\(marker)\""), userId: "leaving")
        }
        try store.save(Self.entry("wallet", "other user's data"), userId: "staying")
        #expect(try Self.diskContains(marker, path), "the check must see the marker before sign-out")

        try store.removeAll(userId: "leaving")
        #expect(try store.entries(userId: "leaving").isEmpty)
        #expect(try store.entries(userId: "staying").map(\.key) == ["wallet"])
        #expect(try !Self.diskContains(marker, path))

        try store.removeEverything()
        #expect(try !Self.diskContains("other user's data", path))
    }

    /// Whether the raw bytes of the database file, or of its WAL or journal file if any, contain `text`.
    private static func diskContains(_ text: String, _ path: String) throws -> Bool {
        try ["", "-wal", "-journal"].contains { suffix in
            guard FileManager.default.fileExists(atPath: path + suffix) else { return false }
            let bytes = try Data(contentsOf: URL(fileURLWithPath: path + suffix))
            return bytes.range(of: Data(text.utf8)) != nil
        }
    }
}
