import Crypto
import Foundation
import HTTPTypes
import Logging
import TallyAPI
import TallyLoad
import TallyStore
import TallyTestKit
import Testing

@testable import TallyServer

/// Secrets stay secret: not in any log line at any level, not readable by other local users, the token key
/// not in the database, and only tokens of exactly the shape Tally signs are accepted.
@Suite("Secrets", .timeLimit(.minutes(10)))
struct SecretsTests {
    static let signingKey = Data((0..<32).map { UInt8($0 * 7 + 3) }).base64EncodedString()

    @Test("At LOG_LEVEL=trace no log line holds a secret, a password hash, an email or a token, on either store", arguments: StoreKind.allCases)
    func noSecretsInTraceLogs(kind: StoreKind) async throws {
        let logs = LogCapture(level: .trace)
        let key = Self.signingKey
        let device = "trace-device-" + UUID().uuidString
        let email = "trace-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let password = "trace password \(UUID().uuidString.prefix(6))"
        let secrets = try await LiveServer.with(kind, logs: logs, configure: { $0.signingKeys = try SigningKeys(parsing: key) }) { server in
            let api = server.connection()
            let guest = try await api.newGuest(deviceId: device)
            let link = try await api.send(.post, "/v1/auth/link", token: guest.accessToken, json: CredentialsRequest(email: email, password: password))
            #expect(link.status == .ok, "\(link.text)")
            let signIn = try await api.send(.post, "/v1/auth/sign-in", json: CredentialsRequest(email: email, password: password))
            let session = try signIn.decode(SessionTokens.self)
            let refreshed = try await api.send(.post, "/v1/auth/refresh", json: RefreshRequest(refreshToken: session.refreshToken))
            let rotated = try refreshed.decode(SessionTokens.self)
            try await api.grant(10, to: guest)
            #expect(try await api.send(.post, "/v1/actions/ai.query", token: rotated.accessToken, headers: [.idempotencyKey: "trace-1"]).status == .ok)
            #expect(try await api.send(.get, "/v1/me", token: rotated.accessToken).status == .ok)
            await api.close()
            return [
                device, Secrets.sha256(device), email, password, guest.accessToken, guest.refreshToken, session.accessToken,
                session.refreshToken, rotated.accessToken, rotated.refreshToken, Secrets.sha256(session.refreshToken),
                Secrets.sha256(rotated.refreshToken), server.adminKey, key, Secrets.hex(Data(base64Encoded: key)!),
            ]
        }
        let text = logs.lines.map(\.text).joined(separator: "\n")
        #expect(logs.lines.count > 20, "[\(kind)] the server logged at trace (\(logs.lines.count) lines)")
        for secret in secrets {
            // As text, and as the hex dumps of bytes that drivers write (`[ 61 62 … ]` and `6162…`).
            let bytes = Array(secret.utf8.prefix(24))
            let spaced = bytes.map { String(format: "%02x", $0) }.joined(separator: " ")
            for form in [secret, spaced, spaced.replacingOccurrences(of: " ", with: "")] {
                #expect(!text.lowercased().contains(form.lowercased()), "[\(kind)] a log line holds a secret (\(secret.prefix(6))…)")
            }
        }
        // No protocol payloads at all: a data row or a bind carries whatever the database holds (the IP-hash
        // key of server_secrets, password hashes, token hashes), as hex.
        #expect(!text.contains("dataRow(") && !text.contains("bytes: ["), "[\(kind)] a log line dumps a database message's bytes")
        for bcrypt in ["$2a$", "$2b$", "$2y$"] {
            #expect(!text.contains(bcrypt), "[\(kind)] a log line holds a bcrypt hash")
        }
    }

    @Test("base64url: every length of random bytes round-trips and matches Foundation's base64 with the URL alphabet; anything else does not decode")
    func base64URL() {
        var generator = SplitMix(seed: 20_261_124)
        for length in 0..<200 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let text = Secrets.base64URL(bytes)
            let foundation = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(text == foundation)
            #expect(Secrets.base64URLDecoded(text) == bytes)
        }
        for bad in ["a", "abcde", "ab+c", "ab/c", "abc=", "ab c", "é"] {
            #expect(Secrets.base64URLDecoded(bad) == nil, "\(bad)")
        }
    }

    @Test("The data directory is 0700 and the database, its WAL, the admin and signing keys 0600, also when found wider")
    func fileModes() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-modes-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // An install from before: a world-readable directory and database.
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        FileManager.default.createFile(atPath: directory + "/tally.sqlite", contents: nil, attributes: [.posixPermissions: 0o644])
        let admin = try AdminKey.resolve(configured: nil, dataDirectory: directory)
        #expect(admin.generated)
        try await LiveServer.with(.sqlite, configure: { $0.dataDirectory = directory }) { server in
            let api = server.connection()
            try await api.grant(5, to: try await api.newGuest())
            await api.close()
            #expect(Self.mode(directory) == 0o700)
            for name in ["tally.sqlite", "tally.sqlite-wal", "tally.sqlite-shm", "signing-keys", "admin-key"] {
                #expect(Self.mode(directory + "/" + name) == 0o600, "\(name): \(String(Self.mode(directory + "/" + name) ?? 0, radix: 8))")
            }
        }
    }

    @Test("The token signing key is not in the database: a copy of tally.sqlite holds no key that verifies a token")
    func signingKeyNotInDatabase() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-keyless-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let key = Self.signingKey
        try await LiveServer.with(.sqlite, configure: { $0.dataDirectory = directory; $0.signingKeys = try SigningKeys(parsing: key) }) { server in
            let api = server.connection()
            _ = try await api.newGuest()
            await api.close()
        }
        let database = try Data(contentsOf: URL(fileURLWithPath: directory + "/tally.sqlite"))
            + ((try? Data(contentsOf: URL(fileURLWithPath: directory + "/tally.sqlite-wal"))) ?? Data())
        for form in [Data(key.utf8), Data(base64Encoded: key)!, Data(Secrets.hex(Data(base64Encoded: key)!).utf8)] {
            #expect(database.range(of: form) == nil, "the signing key is in the database file")
        }
        #expect(database.range(of: Data("jwt-hs256".utf8)) == nil, "a signing key row is in the database")
    }

    @Test("Only tokens of the shape Tally signs are accepted: HS256, a known kid, no crit, no key or URL in the header", arguments: StoreKind.allCases)
    func tokenHeaders(kind: StoreKind) async throws {
        let key = Self.signingKey
        let keys = try SigningKeys(parsing: key)
        try await LiveServer.with(kind, configure: { $0.signingKeys = keys }) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let payload = String(user.accessToken.split(separator: ".")[1])
            let kid = keys.current.id
            func forged(_ header: String, algorithm: String = "HS256") -> String {
                let head = Secrets.base64URL(Data(header.utf8))
                let input = Data("\(head).\(payload)".utf8)
                let secret = SymmetricKey(data: keys.current.secret)
                let signature: Data =
                    switch algorithm {
                    case "HS384": Data(HMAC<SHA384>.authenticationCode(for: input, using: secret))
                    case "none": Data()
                    default: Data(HMAC<SHA256>.authenticationCode(for: input, using: secret))
                    }
                return "\(head).\(payload).\(Secrets.base64URL(signature))"
            }
            // The forging is right: the header Tally writes, signed by hand, is accepted.
            let control = forged(#"{"alg":"HS256","kid":"\#(kid)","typ":"JWT"}"#)
            #expect(try await api.send(.get, "/v1/me", token: control).status == .ok, "a well-formed token is accepted")
            let refused = [
                forged(#"{"alg":"HS384","kid":"\#(kid)","typ":"JWT"}"#, algorithm: "HS384"),
                forged(#"{"alg":"none","kid":"\#(kid)","typ":"JWT"}"#, algorithm: "none"),
                forged(#"{"alg":"HS256","kid":"\#(kid)","typ":"JWT","crit":["exp"]}"#),
                forged(#"{"alg":"HS256","typ":"JWT"}"#),
                forged(#"{"alg":"HS256","kid":"someone-elses","typ":"JWT"}"#),
                forged(#"{"alg":"HS256","kid":"\#(kid)","typ":"at+jwt"}"#),
                forged(#"{"alg":"HS256","kid":"\#(kid)","jku":"https://attacker.example/keys"}"#),
            ]
            for token in refused {
                let response = try await api.send(.get, "/v1/me", token: token)
                #expect(response.status == .unauthorized && response.errorCode == "unauthorized", "\(token.prefix(60)): \(response.status)")
            }
            await api.close()
        }
    }

    @Test("Rotation: tokens signed with a key stay valid while it is listed after the new one, and not once it is removed")
    func rotation() async throws {
        let old = try SigningKeys(parsing: Self.signingKey)
        let newKey = Data((0..<32).map { UInt8(($0 * 11 + 1) & 0xFF) }).base64EncodedString()
        let clock = ManualClock()
        func service(_ keys: String) async throws -> TokenService {
            let service = TokenService(clock: clock, accessTokenTTL: 900, refreshTokenTTL: 3600)
            await service.install(try SigningKeys(parsing: keys))
            return service
        }
        let before = try await service(Self.signingKey)
        let token = try await before.accessToken(userId: "u1", sessionId: "s1").token
        let during = try await service(newKey + "," + Self.signingKey)
        #expect(await during.verify(token)?.identity.userId == "u1", "an old token verifies while the old key is listed")
        let fresh = try await during.accessToken(userId: "u2", sessionId: "s2").token
        #expect(await before.verify(fresh) == nil, "a new token is signed with the new key")
        let after = try await service(newKey)
        #expect(await after.verify(token) == nil, "an old token fails once its key is removed")
        #expect(await after.verify(fresh)?.identity.userId == "u2")
        #expect(old.current.id != (try SigningKeys(parsing: newKey)).current.id)
    }

    static func mode(_ path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int).map { $0 & 0o777 }
    }
}
