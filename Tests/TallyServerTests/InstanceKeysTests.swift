import Crypto
import Foundation
import Logging
import PostgresNIO
import TallyLoad
import TallyPostgres
import TallyStore
import Testing

/// Real `tally serve` processes on one PostgreSQL: a process whose signing or admin key disagrees with a running
/// one's refuses to start, naming the variable; a two-step rotation starts at every step; the keys themselves are
/// never in the database nor in a log.
@Suite("Key agreement between processes", .timeLimit(.minutes(6)))
struct InstanceKeysTests {
    /// A fresh signing key: base64 of 32 random bytes.
    static func newKey() -> String { Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString() }

    /// A started or refused process on `url`.
    final class Server: Sendable {
        let process: ServerProcess
        let signing: String
        let admin: String

        init(_ name: String, url: String, signing: String, admin: String, directory: URL) throws {
            (self.signing, self.admin) = (signing, admin)
            process = try ServerProcess(
                name: name, directory: directory,
                environment: ["DATABASE_URL": url, "TALLY_SIGNING_KEY": signing, "TALLY_ADMIN_KEY": admin, "LOG_LEVEL": "info"])
        }

        /// Waits until it listens.
        func started() async throws { _ = try await process.ports() }

        /// Waits until it exits; its status and log.
        func refused() async -> (ChildProcess.Termination, String) { (await process.process.wait(), process.log) }
    }

    static func withDatabase(_ body: (String, URL) async throws -> Void) async throws {
        try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-keys-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            try await body(url, directory)
        }
    }

    @Test("Another signing key or admin key beside a running process: refused, exit status 1, naming the variable; once it stops, they start")
    func disagreeingKeys() async throws {
        try await Self.withDatabase { url, directory in
            let (key, otherKey, admin, otherAdmin) = (Self.newKey(), Self.newKey(), "instance-keys-admin-0001", "instance-keys-admin-0002")
            let first = try Server("a", url: url, signing: key, admin: admin, directory: directory)
            try await first.started()

            let otherSigning = try Server("b", url: url, signing: otherKey, admin: admin, directory: directory)
            let (status, log) = await otherSigning.refused()
            #expect(status == .exited(1), "\(log)")
            #expect(log.contains("TALLY_SIGNING_KEY differs from that of the instances already running on this database"), "\(log)")
            #expect(log.contains("they sign with key \(String(Self.fingerprint(key).prefix(8)))"), "their key by its fingerprint")
            let otherAdminKey = try Server("c", url: url, signing: key, admin: otherAdmin, directory: directory)
            let (adminStatus, adminLog) = await otherAdminKey.refused()
            #expect(adminStatus == .exited(1))
            #expect(adminLog.contains("TALLY_ADMIN_KEY differs from the admin key of the instances already running on this database"), "\(adminLog)")

            let instances = try await Self.instances(url)
            #expect(instances.count == 1 && instances.first?.signingKeys == [Self.fingerprint(key)], "the refused ones wrote nothing")
            try await Self.expectNoKeys(url: url, servers: [first, otherSigning, otherAdminKey])

            // The first stops (SIGTERM): its row goes with it, and other keys start at once.
            #expect(first.process.stop() == .exited(0))
            #expect(try await Self.instances(url).isEmpty)
            let second = try Server("d", url: url, signing: otherKey, admin: otherAdmin, directory: directory)
            try await second.started()
            #expect(second.process.stop() == .exited(0))
        }
    }

    @Test("A rotation in two rolling restarts (old,new then new,old) starts at each step; new,old at once is refused")
    func rotation() async throws {
        try await Self.withDatabase { url, directory in
            let (old, new, admin) = (Self.newKey(), Self.newKey(), "instance-keys-admin-0003")
            var fleet = [
                try Server("a0", url: url, signing: old, admin: admin, directory: directory),
                try Server("b0", url: url, signing: old, admin: admin, directory: directory),
            ]
            for server in fleet { try await server.started() }

            let skipping = try Server("skip", url: url, signing: "\(new),\(old)", admin: admin, directory: directory)
            let (status, log) = await skipping.refused()
            #expect(status == .exited(1))
            #expect(log.contains("TALLY_SIGNING_KEY: this process would sign with key \(String(Self.fingerprint(new).prefix(8)))"), "\(log)")
            #expect(log.contains("first deploy TALLY_SIGNING_KEY=<old>,<new> to every instance"), "\(log)")

            // Each step restarts the fleet one process at a time: the others run meanwhile.
            for (step, list) in ["\(old),\(new)", "\(new),\(old)", new].enumerated() {
                for index in fleet.indices {
                    #expect(fleet[index].process.stop() == .exited(0))
                    fleet[index] = try Server("\(index)-\(step + 1)", url: url, signing: list, admin: admin, directory: directory)
                    try await fleet[index].started()
                }
                let signing = try await Self.instances(url).map { $0.signingKeys.first }
                #expect(Set(signing) == [Self.fingerprint(step == 0 ? old : new)], "step \(step + 1)")
            }
            try await Self.expectNoKeys(url: url, servers: fleet + [skipping])
            for server in fleet { #expect(server.process.stop() == .exited(0)) }
        }
    }

    // MARK: Helpers

    /// What the database keeps of `key` (the server's fingerprint, computed here from its definition).
    static func fingerprint(_ key: String) -> String {
        let bytes = Data(base64Encoded: key) ?? Data(key.utf8)
        let mac = HMAC<SHA256>.authenticationCode(for: Data("tally.key-fingerprint.v1".utf8), using: SymmetricKey(data: bytes))
        return mac.map { String(format: "%02x", $0) }.joined()
    }

    /// The running instances' rows.
    static func instances(_ url: String) async throws -> [ServerInstance] {
        try await withStore(url) { try await $0.runningInstances() }
    }

    static func withStore<T: Sendable>(_ url: String, _ body: @Sendable (PostgresStore) async throws -> T) async throws -> T {
        var logger = Logger(label: "tally.test.instances")
        logger.logLevel = .error
        let store = PostgresStore(configuration: try PostgresStore.configuration(url: url, maximumConnections: 1), logger: logger)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                try await store.run()
                return nil
            }
            defer { group.cancelAll() }
            return try await body(store)
        }
    }

    /// Neither the database's `server_instances` nor any process's log holds a key in any form (base64, hex,
    /// the admin key as written), nor an unkeyed hash of one; only the keyed fingerprints are there.
    static func expectNoKeys(url: String, servers: [Server], sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let rows = try await withStore(url) { store in
            try await store.rows("SELECT row_to_json(s)::text FROM server_instances s").map { try $0.decode(String.self) }
        }
        let database = rows.joined(separator: "\n")
        for server in servers {
            let signing = server.signing.split(separator: ",").map(String.init)
            var forms = [server.admin, Self.sha256(Data(server.admin.utf8))]
            for key in signing {
                let bytes = try #require(Data(base64Encoded: key))
                forms += [key, bytes.map { String(format: "%02x", $0) }.joined(), Self.sha256(bytes)]
                forms.append(Self.sha256(Data("tally-kid:".utf8) + bytes))
                #expect(Self.fingerprint(key) != Self.sha256(bytes), sourceLocation: sourceLocation)
            }
            for form in forms {
                #expect(!database.contains(form), "a key in server_instances", sourceLocation: sourceLocation)
                for other in servers { #expect(!other.process.log.contains(form), "a key in a log", sourceLocation: sourceLocation) }
            }
        }
    }

    static func sha256(_ data: Data) -> String { SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined() }
}
