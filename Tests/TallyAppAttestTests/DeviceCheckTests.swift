import AsyncHTTPClient
import Crypto
import Foundation
import Hummingbird
import Logging
import NIOCore
import Synchronization
import TallyAppAttest
import TallyDevAppStore
import TallyTestKit
import Testing

/// ``DeviceCheckClient`` against the stand-in's DeviceCheck (``DevDeviceCheck``) over loopback HTTP: bits never set,
/// set and read back, shared by a device's tokens and by no other device; forged tokens, wrong keys and stale tokens
/// refused as Apple refuses them; an unreachable or failing service. Time is driven by hand, never slept.
@Suite("DeviceCheck client and stand-in", .timeLimit(.minutes(2)))
struct DeviceCheckTests {
    @Test("bits never set are nil; set, they read back with the month of the update")
    func neverSetThenUpdated() async throws {
        try await DeviceCheckFixture.with { fixture in
            let token = try await fixture.token(for: "iPhone A")
            #expect(try await fixture.client.queryTwoBits(deviceToken: token) == nil)
            try await fixture.client.validateDeviceToken(token)
            try await fixture.client.updateTwoBits(deviceToken: token, bit0: true, bit1: nil)
            #expect(try await fixture.client.queryTwoBits(deviceToken: token) == DeviceBits(bit0: true, bit1: false, lastUpdate: "2027-01"))
            // A month on, the other bit alone: the first is kept, the month moves.
            fixture.clock.advance(by: 31 * 86_400)
            try await fixture.client.updateTwoBits(deviceToken: token, bit0: nil, bit1: true)
            #expect(try await fixture.client.queryTwoBits(deviceToken: token) == DeviceBits(bit0: true, bit1: true, lastUpdate: "2027-02"))
            try await fixture.client.updateTwoBits(deviceToken: token, bit0: false, bit1: false)
            #expect(try await fixture.client.queryTwoBits(deviceToken: token) == DeviceBits(bit0: false, bit1: false, lastUpdate: "2027-02"))
        }
    }

    @Test("a device's tokens differ and share its bits; another device's bits are its own")
    func devices() async throws {
        try await DeviceCheckFixture.with { fixture in
            let first = try await fixture.token(for: "iPhone A")
            let reinstalled = try await fixture.token(for: "iPhone A")
            let other = try await fixture.token(for: "iPhone B")
            #expect(first != reinstalled)
            try await fixture.client.updateTwoBits(deviceToken: first, bit0: true, bit1: true)
            #expect(try await fixture.client.queryTwoBits(deviceToken: reinstalled) == DeviceBits(bit0: true, bit1: true, lastUpdate: "2027-01"))
            #expect(try await fixture.client.queryTwoBits(deviceToken: other) == nil)
            try await fixture.client.updateTwoBits(deviceToken: other, bit0: false, bit1: true)
            #expect(try await fixture.client.queryTwoBits(deviceToken: first)?.bit0 == true)
            #expect(fixture.store.deviceCheck.bits(of: "iPhone B")?.bit0 == false)
        }
    }

    @Test("a forged or altered device token is an invalid token, and never shows in the error")
    func forgedTokens() async throws {
        try await DeviceCheckFixture.with { fixture in
            let genuine = try await fixture.token(for: "iPhone A")
            var altered = Array(try #require(Data(base64Encoded: genuine)))
            altered[altered.count / 2] ^= 0x01
            let forged = Data((0..<64).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
            let otherStandIn = try DevDeviceCheck(clock: fixture.clock).deviceToken(for: "iPhone A")
            for token in [forged, Data(altered).base64EncodedString(), otherStandIn, "not base64 at all", ""] {
                let error = await #expect(throws: DeviceCheckError.self) { try await fixture.client.queryTwoBits(deviceToken: token) }
                #expect(error?.code == .invalidDeviceToken)
                #expect(token.isEmpty || !(error?.description.contains(token) ?? true))
                await #expect(throws: DeviceCheckError.self) { try await fixture.client.updateTwoBits(deviceToken: token, bit0: true, bit1: nil) }
            }
            #expect(fixture.store.deviceCheck.bits(of: "iPhone A") == nil)
        }
    }

    @Test("a wrong key, key id or team is unauthorized")
    func wrongCredentials() async throws {
        try await DeviceCheckFixture.with { fixture in
            let token = try await fixture.token(for: "iPhone A")
            let right = fixture.client.configuration
            var wrongKey = right
            wrongKey.privateKey = P256.Signing.PrivateKey()
            var wrongKeyId = right
            wrongKeyId.keyId = "ZZZZZZZZZZ"
            var wrongTeam = right
            wrongTeam.teamId = "ZZZZZZZZZZ"
            for (configuration, status) in [(wrongKey, 401), (wrongKeyId, 401), (wrongTeam, 403)] {
                let client = DeviceCheckClient(configuration: configuration, now: { fixture.clock.now }, logger: DeviceCheckFixture.quietLogger)
                let error = await #expect(throws: DeviceCheckError.self) { try await client.queryTwoBits(deviceToken: token) }
                #expect(error?.code == .unauthorized && error?.status == status)
                #expect(!(error?.description.contains("eyJ") ?? true), "no bearer token in the error")
            }
            #expect(throws: DeviceCheckError.self) {
                try DeviceCheckClient.Configuration(keyId: right.keyId, teamId: right.teamId, privateKeyPEM: "not a key")
            }
        }
    }

    @Test("a bearer token is reused until 30 minutes old; one over an hour old is refused, then signed anew")
    func staleToken() async throws {
        try await DeviceCheckFixture.with { fixture in
            let token = try await fixture.token(for: "iPhone A")
            // The client's own clock: its token is signed at the start.
            let clientClock = ManualClock(DeviceCheckFixture.start)
            let client = DeviceCheckClient(configuration: fixture.client.configuration, now: { clientClock.now }, logger: DeviceCheckFixture.quietLogger)
            #expect(try await client.queryTwoBits(deviceToken: token) == nil)
            // 29 minutes on for the client (the token is reused), 61 for Apple: too old.
            clientClock.advance(by: 29 * 60)
            fixture.clock.advance(by: 61 * 60)
            let error = await #expect(throws: DeviceCheckError.self) { try await client.queryTwoBits(deviceToken: token) }
            #expect(error?.code == .unauthorized && error?.status == 401)
            // The refusal dropped it: the next call signs at the client's now, 32 minutes old for Apple.
            #expect(try await client.queryTwoBits(deviceToken: token) == nil)
            // A token from more than a minute in Apple's future is refused too.
            let aheadClock = ManualClock(fixture.clock.now.addingTimeInterval(120))
            let ahead = DeviceCheckClient(configuration: fixture.client.configuration, now: { aheadClock.now }, logger: DeviceCheckFixture.quietLogger)
            await #expect(throws: DeviceCheckError(.unauthorized, status: 401, "Apple answered query_two_bits with status 401: Unable to verify authorization token")) {
                try await ahead.queryTwoBits(deviceToken: token)
            }
        }
    }

    @Test("the stand-in down, or answering 503, is unavailable")
    func unavailable() async throws {
        let (configuration, token) = try await DeviceCheckFixture.with { fixture in
            let token = try await fixture.token(for: "iPhone A")
            fixture.store.serverAPIRecords.add(DevFault(path: "/v1/query_two_bits", status: 503))
            let error = await #expect(throws: DeviceCheckError.self) { try await fixture.client.queryTwoBits(deviceToken: token) }
            #expect(error?.code == .unavailable && error?.status == 503 && error?.isRetryable == true)
            return (fixture.client.configuration, token)
        }
        var down = configuration
        down.timeout = .seconds(2)
        let client = DeviceCheckClient(configuration: down, now: { DeviceCheckFixture.start }, logger: DeviceCheckFixture.quietLogger)
        let error = await #expect(throws: DeviceCheckError.self) { try await client.updateTwoBits(deviceToken: token, bit0: true, bit1: nil) }
        #expect(error?.code == .unavailable && error?.status == nil)
        #expect(!(error?.description.contains(token) ?? true))
    }

    @Test("the stand-in checks requests as Apple does: authorization, device token, time stamp, payload")
    func appleRefusals() async throws {
        try await DeviceCheckFixture.with { fixture in
            let token = try await fixture.token(for: "iPhone A")
            let good = #"{"device_token":"\#(token)","transaction_id":"t1","timestamp":1800000000000"#
            let bearer = try await fixture.bearer()
            let cases: [(String?, String, Int, String)] = [
                (nil, good + "}", 400, "Missing or badly formatted authorization token"),
                ("Bearer nope", good + "}", 400, "Missing or badly formatted authorization token"),
                (bearer, #"{"transaction_id":"t1","timestamp":1800000000000}"#, 400, "Missing or incorrectly formatted device token payload"),
                (bearer, #"{"device_token":"\#(token)","timestamp":1800000000000}"#, 400, "Missing or incorrectly formatted payload"),
                (bearer, #"{"device_token":"\#(token)","transaction_id":"t1"}"#, 400, "Missing or incorrectly formatted time stamp"),
                (bearer, #"{"device_token":"\#(token)","transaction_id":"t1","timestamp":"soon"}"#, 400, "Missing or incorrectly formatted time stamp"),
                (bearer, good + #","bit0":1}"#, 400, "Missing or incorrectly formatted payload"),
                (bearer, "[]", 400, "Missing or incorrectly formatted payload"),
                (bearer, good + #","bit1":true}"#, 200, ""),
            ]
            for (authorization, body, status, text) in cases {
                let answer = try await fixture.post("/v1/update_two_bits", body: body, authorization: authorization)
                #expect(answer.status == status && answer.text == text, "\(body)")
            }
            #expect(fixture.store.deviceCheck.bits(of: "iPhone A") == DevDeviceBits(bit0: false, bit1: true, lastUpdateTime: "2027-01"))
        }
    }
}

/// The stand-in served on 127.0.0.1 at a free port, on a hand-driven clock, and a client configured from its
/// `GET /devicecheck/key`.
private struct DeviceCheckFixture {
    /// 2027-01-15T08:00:00Z.
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    let clock: ManualClock
    let store: DevAppStore
    let base: String
    let client: DeviceCheckClient

    /// Runs `body` with a fresh stand-in, served for its duration.
    static func with<T: Sendable>(_ body: (DeviceCheckFixture) async throws -> T) async throws -> T {
        let clock = ManualClock(start)
        let store = DevAppStore(authority: try DevCertificateAuthority.generate(now: start), clock: clock)
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = buildDevAppStoreApplication(store: store, port: 0, logger: DeviceCheckFixture.quietLogger) { continuation.yield($0) }
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.runService(gracefulShutdownSignals: []) }
            defer { group.cancelAll() }
            for await port in ports {
                let base = "http://127.0.0.1:\(port)"
                let key = try await get(base + "/devicecheck/key")
                let configuration = try DeviceCheckClient.Configuration(
                    keyId: key["keyId"] ?? "", teamId: key["teamId"] ?? "", privateKeyPEM: key["privateKeyPEM"] ?? "", baseURL: base)
                #expect(key["teamId"] == store.deviceCheck.key.teamId)
                let client = DeviceCheckClient(configuration: configuration, now: { clock.now }, logger: DeviceCheckFixture.quietLogger)
                return try await body(DeviceCheckFixture(clock: clock, store: store, base: base, client: client))
            }
            throw CancellationError()
        }
    }

    /// A new device token of `device`, from `POST /devicecheck/device-token`.
    func token(for device: String) async throws -> String {
        let answer = try await post("/devicecheck/device-token", body: #"{"device":"\#(device)"}"#, authorization: nil)
        let decoded = try JSONDecoder().decode([String: String].self, from: Data(answer.text.utf8))
        return try #require(decoded["deviceToken"])
    }

    /// A good `Authorization` header, signed as the client signs (ES256, `kid`, `iss`, `iat` now).
    func bearer() async throws -> String {
        let key = store.deviceCheck.key
        let header = Data(#"{"alg":"ES256","kid":"\#(key.keyId)"}"#.utf8)
        let claims = Data(#"{"iat":\#(Int(clock.now.timeIntervalSince1970)),"iss":"\#(key.teamId)"}"#.utf8)
        let input = Self.base64URL(header) + "." + Self.base64URL(claims)
        let signature = try key.privateKey.signature(for: Data(input.utf8)).rawRepresentation
        return "Bearer " + input + "." + Self.base64URL(signature)
    }

    /// Servers in tests log at critical: a cancelled Hummingbird server logs its channels' cancellation as errors.
    static var quietLogger: Logger {
        var logger = Logger(label: "devicecheck-tests")
        logger.logLevel = .critical
        return logger
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// `POST base + path` with `body`; the status and the text answered.
    func post(_ path: String, body: String, authorization: String?) async throws -> (status: Int, text: String) {
        var request = HTTPClientRequest(url: base + path)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        if let authorization { request.headers.add(name: "Authorization", value: authorization) }
        request.body = .bytes(ByteBuffer(string: body))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return (Int(response.status.code), String(buffer: bytes))
    }

    private static func get(_ url: String) async throws -> [String: String] {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: .seconds(10))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return try JSONDecoder().decode([String: String].self, from: Data(bytes.readableBytesView))
    }
}
