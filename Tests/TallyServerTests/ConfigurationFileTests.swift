import Foundation
import TallyDevAppStore
import TallyLoad
@testable import TallyServer
import TallyStore
import Testing
import Yams

/// The configuration file is decoded once, into one type, refusing every key it does not have at every level
/// with the place and the key meant; `tally serve --check-config` checks a file and the environment.
@Suite("Configuration file", .timeLimit(.minutes(2)))
struct ConfigurationFileTests {
    /// `docs/tally.example.yaml`: every key of the file at every level.
    static let exampleURL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/tally.example.yaml")
    static let environment = [
        "OPENAI_API_KEY": "sk-example-key-never-shown", "TALLY_MAIL_SECRET": "mail-secret-never-shown-0123456789abcdef",
        // A P-256 key made for this test, in the .p8 form Apple hands out (PKCS #8 PEM).
        "TALLY_APPLE_KEY": """
            -----BEGIN PRIVATE KEY-----
            MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgOx8VrEVgKzZAarDE
            DbZzdrXvrVv/jBw1djWhEWluGeWhRANCAATkO+Fa1fnLq1sG7Mr0TELJA6QOJJCM
            Aa1Oqv0ZgMoyuUXj2AanFiWR4Fs4lkEVfLifcbzfO3bBx8XR1v6qwLRL
            -----END PRIVATE KEY-----
            """,
        // The same test key stands for the In-App Purchase key (appStore.serverAPI).
        "TALLY_APPSTORE_KEY": """
            -----BEGIN PRIVATE KEY-----
            MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgOx8VrEVgKzZAarDE
            DbZzdrXvrVv/jBw1djWhEWluGeWhRANCAATkO+Fa1fnLq1sG7Mr0TELJA6QOJJCM
            Aa1Oqv0ZgMoyuUXj2AanFiWR4Fs4lkEVfLifcbzfO3bBx8XR1v6qwLRL
            -----END PRIVATE KEY-----
            """,
        // And for the DeviceCheck key (deviceCheck.privateKeyEnv).
        "TALLY_DEVICECHECK_KEY": """
            -----BEGIN PRIVATE KEY-----
            MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgOx8VrEVgKzZAarDE
            DbZzdrXvrVv/jBw1djWhEWluGeWhRANCAATkO+Fa1fnLq1sG7Mr0TELJA6QOJJCM
            Aa1Oqv0ZgMoyuUXj2AanFiWR4Fs4lkEVfLifcbzfO3bBx8XR1v6qwLRL
            -----END PRIVATE KEY-----
            """,
    ]

    static func example() throws -> String { try String(contentsOf: exampleURL, encoding: .utf8) }

    /// A directory holding the files the example names (`certs/root.der`), which it is read relative to.
    static let exampleDirectory: URL = {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-example-\(UUID().uuidString)")
        try? writeExampleFiles(to: directory)
        return directory
    }()

    /// Writes the files the example names into `directory`.
    static func writeExampleFiles(to directory: URL) throws {
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("certs"), withIntermediateDirectories: true)
        try Data(exampleRoot).write(to: directory.appendingPathComponent("certs/root.der"))
        try Data(exampleRoot).write(to: directory.appendingPathComponent("certs/appattest-root.pem"))
    }

    /// The example's root certificate file: the local App Store's root (verification is tested with real chains elsewhere).
    static let exampleRoot = (try? DevCertificateAuthority.generate(now: Date()).rootDER) ?? []

    /// The message `text` is refused with ("" when it is accepted).
    static func refusal(_ text: String, environment: [String: String] = environment) -> String {
        do {
            _ = try TallyConfiguration(file: text, environment: environment, directory: exampleDirectory)
            return ""
        } catch {
            return "\(error)"
        }
    }

    @Test("The issue's example: a misspelt `tokens` no longer makes a paid action quota-only")
    func misspeltTokens() {
        let text = "quotas: [{name: readings, daily: 3}]\nactions: [{name: reading, quota: readings, token: 5}]\n"
        #expect(Self.refusal(text) == #"unknown key "token" in actions[0]; did you mean "tokens"?"#)
        #expect(Self.refusal("colections: [{name: notes}]") == #"unknown key "colections" at the top level; did you mean "collections"?"#)
        #expect(Self.refusal("limits: {signInLockout: {failures: 3, window: 60}}").hasPrefix(
            #"unknown key "window" in limits.signInLockout; known keys: failures, seconds, accountFailures, maxDelaySeconds"#))
    }

    @Test("The example names every key the file has, at every level (a key added later must be added to it)")
    func exampleIsComplete() throws {
        let example = try #require(try Yams.compose(yaml: Self.example()))
        let known = Set(Self.keyPaths(of: ConfigurationShape.of(ConfigurationFile.self)))
        let given = Set(Self.keyPaths(of: example))
        #expect(known.count > 50, "the probe found the keys: \(known.sorted())")
        #expect(known.subtracting(given).isEmpty, "missing from docs/tally.example.yaml: \(known.subtracting(given).sorted())")
        #expect(given.subtracting(known).isEmpty)
        #expect(Self.refusal(try Self.example()) == "", "the example is valid")
    }

    @Test("Every key of the example, misspelt (a letter dropped, two swapped), is refused naming its place and the key meant")
    func everyMisspeltKeyIsRefused() throws {
        let example = try #require(try Yams.compose(yaml: Self.example()))
        let shape = ConfigurationShape.of(ConfigurationFile.self)
        var checked = 0
        for (path, key) in Self.keys(in: example) {
            let siblings = shape.shape(at: path)?.keys.map(\.name) ?? []
            for wrong in Self.misspellings(of: key) where !siblings.contains(wrong) {
                let text = try Yams.serialize(node: Self.renaming(key, to: wrong, at: path.steps, in: example))
                let place = path.steps.isEmpty ? "at the top level" : "in \(path)"
                #expect(Self.refusal(text) == #"unknown key "\#(wrong)" \#(place); did you mean "\#(key)"?"#, "\(path) \(key) → \(wrong)")
                checked += 1
            }
        }
        #expect(checked > 150, "the example has keys at every level: \(checked) misspellings checked")
    }

    @Test("What the file says takes effect: the example's effective configuration is the example, and it reads back the same")
    func effectiveConfiguration() throws {
        let text = try Self.example()
        let configuration = try TallyConfiguration(file: text, environment: Self.environment, directory: Self.exampleDirectory)
        let effective = ConfigurationFile(effective: configuration)
        #expect(effective == (try ConfigurationDecoding.decode(ConfigurationFile.self, from: text)))
        let written = configuration.effectiveFile
        #expect(!written.contains("sk-example-key-never-shown") && written.contains("apiKeyEnv: OPENAI_API_KEY"))
        #expect(
            ConfigurationFile(effective: try TallyConfiguration(file: written, environment: Self.environment, directory: Self.exampleDirectory))
                == effective)

        // Without a file, every setting with a default is written out, and reads back as the defaults.
        let defaults = TallyConfiguration().effectiveFile
        let reread = try TallyConfiguration(file: defaults, environment: [:])
        #expect(ConfigurationFile(effective: reread) == ConfigurationFile(effective: TallyConfiguration()))
        for key in ["signupGrant: 0", "readings", "sessionsPerUser: 50", "maxDelaySeconds: 300", "tombstoneRetentionDays: 30"] {
            #expect(defaults.contains(key), "\(key) in\n\(defaults)")
        }
    }

    @Test("appStore.sandbox bounds Sandbox credits per account: 1,000 by default, 0 for none; out of range or unknown keys refused")
    func sandboxBound() throws {
        let section = { (sandbox: String) in
            "appStore: {bundleId: com.example.app, environments: [Sandbox], products: [{productId: p, tokens: 1}]\(sandbox)}"
        }
        let bound = { (text: String) in try TallyConfiguration(file: text, environment: [:]).appStore?.sandboxTokensPerAccount }
        #expect(try bound(section("")) == 1_000)
        #expect(try bound(section(", sandbox: {tokensPerAccount: 0}")) == 0)
        #expect(try bound(section(", sandbox: {tokensPerAccount: 25000}")) == 25_000)
        #expect(Self.refusal(section(", sandbox: {tokensPerAccount: -1}")).hasPrefix("appStore.sandbox.tokensPerAccount must be between 0"))
        #expect(Self.refusal(section(", sandbox: {tokens: 5}")).hasPrefix(#"unknown key "tokens" in appStore.sandbox"#), "\(Self.refusal(section(", sandbox: {tokens: 5}")))")
        let written = try TallyConfiguration(file: section(", sandbox: {tokensPerAccount: 7}"), environment: [:]).effectiveFile
        #expect(try TallyConfiguration(file: written, environment: [:]).appStore?.sandboxTokensPerAccount == 7, "\(written)")
    }

    @Test("Wrong values, lists for mappings, missing and repeated keys name their place; all unknown keys are listed at once")
    func otherMistakes() {
        let cases = [
            ("actions: [{name: reading, tokens: five}]", #"actions[0].tokens: expected a whole number, found "five""#),
            ("limits: {sessionsPerUser: [1]}", "limits.sessionsPerUser: expected a whole number, found a list"),
            ("ai: {upstream: {baseURL: 'http://x/v1'}, models: [{name: a}]}", #"missing key "promptTokensPerCredit" in ai.models[0]"#),
            ("quotas: {name: readings}", "quotas: expected a list ([…] or lines starting with '- '), found a mapping"),
            ("limits: [sessionsPerUser]", "limits: expected a mapping ({key: value}), found a list"),
            ("signupGrant: 1\nsignupGrant: 2", "the configuration file is not valid YAML or JSON: Parser: expected all keys to be unique"),
            ("limits: {sesionsPerUser: 1, linkPerUsr: {limit: 1, seconds: 1}}\nsignupGrnt: 1",
             #"unknown key "sesionsPerUser" in limits; did you mean "sessionsPerUser"?"# + "\n"
                + #"unknown key "linkPerUsr" in limits; did you mean "linkPerUser"?"# + "\n"
                + #"unknown key "signupGrnt" at the top level; did you mean "signupGrant"?"#),
            ("quotas: [{name: readings, daily: 3}]\nactions: [{name: reading, quota: reading}]", "action 'reading' uses unknown quota 'reading'"),
            ("{", "the configuration file is not valid YAML or JSON"),
        ]
        for (text, message) in cases {
            let refusal = Self.refusal(text)
            // The unknown keys come in the file's order, which YAML keeps.
            #expect(refusal.hasPrefix(message), "\(text)\n→ \(refusal)")
        }
        #expect(Self.refusal("") == "" && Self.refusal("limits:\n") == "", "an empty file or section keeps the defaults")
        #expect(ConfigurationDecoding.suggestion(for: "maxDocs", among: ["maxDocuments", "name"]) == nil, "too far to be a typo")
        #expect(ConfigurationDecoding.editDistance("tokens", "tokesn") == 1 && ConfigurationDecoding.editDistance("", "ab") == 2)
    }

    @Test("tally serve --check-config: a valid file prints every setting (secrets as set or unset) and exits 0; without touching a database")
    func checkConfigAcceptsAValidFile() async throws {
        try await Self.withDirectory { directory in
            let file = directory.appendingPathComponent("tally.yaml")
            try Data(try Self.example().utf8).write(to: file)
            try Self.writeExampleFiles(to: directory)
            let signingKey = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
            // Nothing listens on port 9: a server would wait for it; the check never connects.
            let environment = Self.environment.merging([
                "TALLY_CONFIG": file.path, "DATABASE_URL": "postgres://tally:db-password-never-shown@127.0.0.1:9/tally",
                "TALLY_ADMIN_KEY": "admin-key-never-shown-0123", "TALLY_SIGNING_KEY": signingKey,
            ]) { $1 }
            let (termination, output, errors) = try await Self.checkConfig(environment: environment, directory: directory)
            #expect(termination == .exited(0), "\(errors)")
            for secret in [
                "db-password-never-shown", "admin-key-never-shown-0123", signingKey, "sk-example-key-never-shown",
                "mail-secret-never-shown",
            ] {
                #expect(!output.contains(secret) && !errors.contains(secret))
            }
            for line in [
                "databaseURL (DATABASE_URL)", "postgres://tally:***@127.0.0.1:9/tally", "adminKey (TALLY_ADMIN_KEY)", "set, 1 key (the first signs)",
                "AI upstream key (OPENAI_API_KEY)", "sessionsPerUser: 50", "name: todays_prediction", "idleTimeout (--idle-timeout)",
                "mail hook secret (TALLY_MAIL_SECRET)", "secretEnv: TALLY_MAIL_SECRET",
            ] {
                #expect(output.contains(line), "\(line) in\n\(output)")
            }
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("data").path), "nothing was created")
        }
    }

    @Test("tally serve --check-config: a misspelt key and a bad environment are all reported, exit status 1")
    func checkConfigRefusesMistakes() async throws {
        try await Self.withDirectory { directory in
            let file = directory.appendingPathComponent("tally.yaml")
            try Data("actions: [{name: reading, quota: readings, token: 5}]\n".utf8).write(to: file)
            let environment = [
                "TALLY_CONFIG": file.path, "DATABASE_URL": "mysql://tally:pw-never-shown@db/tally", "TALLY_ADMIN_KEY": "short",
                "TALLY_SIGNING_KEY": "not-base64-of-32-bytes",
            ]
            let (termination, output, errors) = try await Self.checkConfig(environment: environment, directory: directory)
            #expect(termination == .exited(1))
            #expect(output.isEmpty)
            for line in [
                #"unknown key "token" in actions[0]; did you mean "tokens"?"#,
                "DATABASE_URL: invalid database URL: expected postgres://user:password@host:port/database",
                "TALLY_ADMIN_KEY must be at least 16 characters", "TALLY_SIGNING_KEY: a signing key must be base64 of at least 32 random bytes",
            ] {
                #expect(errors.contains(line), "\(line) in\n\(errors)")
            }
            #expect(!errors.contains("pw-never-shown"))
            // `serve` itself refuses the same way, before starting anything.
            let (served, _, serveErrors) = try await Self.checkConfig(environment: environment, directory: directory, check: false)
            #expect(served == .exited(1))
            #expect(serveErrors.contains(#"unknown key "token" in actions[0]; did you mean "tokens"?"#), "\(serveErrors)")
        }
    }

    // MARK: Helpers

    /// Runs `tally serve --check-config` (or plain `serve`) with exactly `environment`; how it ended, its standard
    /// output and error.
    static func checkConfig(
        environment: [String: String], directory: URL, check: Bool = true
    ) async throws -> (ChildProcess.Termination, String, String) {
        let run = UUID().uuidString
        let (output, errors) = (directory.appendingPathComponent("stdout-\(run)"), directory.appendingPathComponent("stderr-\(run)"))
        let process = try ChildProcess(
            TallyBinary.path,
            arguments: ["serve"] + (check ? ["--check-config"] : []) + ["--port", "0", "--admin-port", "0", "--data-dir", directory.appendingPathComponent("data").path],
            environment: environment, standardOutput: .file(output), standardError: .file(errors))
        let termination = await process.wait()
        let read = { (url: URL) in (try? String(contentsOf: url, encoding: .utf8)) ?? "" }
        return (termination, read(output), read(errors))
    }

    static func withDirectory(_ body: (URL) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await body(directory)
    }

    /// Every key of `node`, at every level, with the path of the mapping it is in.
    static func keys(in node: Node, at path: ConfigurationPath = .root) -> [(ConfigurationPath, String)] {
        switch node {
        case .mapping(let mapping):
            return mapping.flatMap { key, value in
                let name = key.string ?? ""
                return [(path, name)] + keys(in: value, at: path.appending(.key(name)))
            }
        case .sequence(let sequence):
            return sequence.enumerated().flatMap { index, item in keys(in: item, at: path.appending(.index(index))) }
        default:
            return []
        }
    }

    /// The keys of `node` as `limits.signInLockout.failures`, `ai.models[].name` (any element of a list).
    static func keyPaths(of node: Node) -> [String] {
        keys(in: node).map { path, key in
            let prefix = path.steps.reduce(into: "") { text, step in
                if case .key(let name) = step { text += text.isEmpty ? name : ".\(name)" } else { text += "[]" }
            }
            return prefix.isEmpty ? key : "\(prefix).\(key)"
        }
    }

    /// The keys a shape knows, named as ``keyPaths(of:)-(Node)`` names them.
    static func keyPaths(of shape: ConfigurationShape, prefix: String = "") -> [String] {
        switch shape.kind {
        case .value: return []
        case .list: return shape.element.map { keyPaths(of: $0, prefix: prefix + "[]") } ?? []
        case .mapping:
            return shape.keys.flatMap { key in
                let path = prefix.isEmpty ? key.name : "\(prefix).\(key.name)"
                return [path] + keyPaths(of: key.shape, prefix: path)
            }
        }
    }

    /// `key` with its middle letter dropped, and with the two letters around its middle swapped (the first
    /// differing pair from there, so that the swap changes it).
    static func misspellings(of key: String) -> [String] {
        var letters = Array(key)
        let middle = letters.count / 2
        var dropped = letters
        dropped.remove(at: middle)
        var result = [String(dropped)]
        if let swap = (max(1, middle)..<letters.count).first(where: { letters[$0 - 1] != letters[$0] }) {
            letters.swapAt(swap - 1, swap)
            result.append(String(letters))
        }
        return result
    }

    /// `node` with the key `key` of the mapping at `steps` renamed `newName`.
    static func renaming(_ key: String, to newName: String, at steps: [ConfigurationPath.Step], in node: Node) -> Node {
        switch (steps.first, node) {
        case (nil, .mapping(let mapping)):
            return .mapping(Node.Mapping(mapping.map { pair in (pair.key.string == key ? Node(newName) : pair.key, pair.value) }))
        case (.key(let name)?, .mapping(let mapping)):
            return .mapping(Node.Mapping(mapping.map { pair in
                (pair.key, pair.key.string == name ? renaming(key, to: newName, at: Array(steps.dropFirst()), in: pair.value) : pair.value)
            }))
        case (.index(let index)?, .sequence(let sequence)):
            return .sequence(Node.Sequence(sequence.enumerated().map { offset, item in
                offset == index ? renaming(key, to: newName, at: Array(steps.dropFirst()), in: item) : item
            }))
        default:
            return node
        }
    }
}

extension TallyConfiguration {
    /// `text` read as the configuration file, with `catalog`'s quotas, actions and grant in place of the file's
    /// (tests declare their catalog in code).
    init(file text: String, catalog: Catalog, environment: [String: String] = [:]) throws {
        var file = try ConfigurationDecoding.decode(ConfigurationFile.self, from: text)
        file.signupGrant = catalog.signupGrant
        file.quotas = catalog.quotas.map { ConfigurationFile.Quota(name: $0.name, daily: $0.daily) }
        file.actions = catalog.actions.map { ConfigurationFile.Action(name: $0.name, quota: $0.quota, tokens: $0.tokens) }
        self.init()
        try file.apply(to: &self, environment: environment, directory: nil)
    }
}
