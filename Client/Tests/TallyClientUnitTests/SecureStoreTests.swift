import Foundation
import Testing
@testable import TallyClient

@Suite(.timeLimit(.minutes(1))) struct SecureStoreTests {
    private static func temporaryDirectory() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("SecureStoreTests-\(UUID().uuidString)")
    }

    private static func permissions(_ url: URL) throws -> Int? {
        try FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? Int
    }

    @Test func fileStoreRoundTripOverwriteDelete() throws {
        let parent = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: parent) }
        let store = try FileSecureStore(directory: parent.appendingPathComponent("secrets"))

        #expect(try store.read("refresh_token") == nil)
        try store.write(Data("first".utf8), for: "refresh_token")
        #expect(try store.read("refresh_token") == Data("first".utf8))
        try store.write(Data("second".utf8), for: "refresh_token")
        #expect(try store.read("refresh_token") == Data("second".utf8))
        try store.write(Data(), for: "installation.secret-1")
        #expect(try store.read("installation.secret-1") == Data())

        try store.delete("refresh_token")
        #expect(try store.read("refresh_token") == nil)
        try store.delete("refresh_token")  // deleting a missing secret is fine

        // Nothing but the remaining secret: no temporary files left behind.
        let files = try FileManager.default.contentsOfDirectory(atPath: parent.appendingPathComponent("secrets").path)
        #expect(files == ["installation.secret-1"])
    }

    @Test func fileStorePermissions() throws {
        let parent = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: parent) }
        let directory = parent.appendingPathComponent("secrets")
        let store = try FileSecureStore(directory: directory)
        try store.write(Data("secret".utf8), for: "installation")
        try store.write(Data("again".utf8), for: "installation")

        #expect(try Self.permissions(directory) == 0o700)
        #expect(try Self.permissions(directory.appendingPathComponent("installation")) == 0o600)

        // An existing, looser directory is tightened.
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
        _ = try FileSecureStore(directory: directory)
        #expect(try Self.permissions(directory) == 0o700)
    }

    @Test(arguments: ["", ".", "..", ".lock", "a/b", "../escape", "name with space", "ü", "a\0b"])
    func fileStoreRejectsInvalidNames(name: String) throws {
        let parent = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: parent) }
        let store = try FileSecureStore(directory: parent)

        #expect(throws: SecureStoreError.self) { try store.write(Data("x".utf8), for: name) }
        #expect(throws: SecureStoreError.self) { try store.read(name) }
        #expect(throws: SecureStoreError.self) { try store.delete(name) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: parent.path).isEmpty)
    }

    @Test func errorDescriptionHasNoSecret() throws {
        let parent = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: parent) }
        let store = try FileSecureStore(directory: parent)
        do {
            try store.write(Data("hunter2".utf8), for: "bad/name")
            Issue.record("expected an error")
        } catch {
            #expect(!String(describing: error).contains("hunter2"))
        }
    }

    @Test func memoryStoreRoundTrip() throws {
        let store = MemorySecureStore()
        #expect(store.read("refresh_token") == nil)
        store.write(Data("first".utf8), for: "refresh_token")
        store.write(Data("second".utf8), for: "refresh_token")
        #expect(store.read("refresh_token") == Data("second".utf8))
        store.delete("refresh_token")
        #expect(store.read("refresh_token") == nil)

        let erased: any SecureStore = store
        try erased.write(Data("x".utf8), for: "installation")
        #expect(try erased.read("installation") == Data("x".utf8))
    }
}
