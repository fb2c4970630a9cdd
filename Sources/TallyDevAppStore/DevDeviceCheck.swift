import Crypto
import Foundation
import Synchronization
import TallyAPI

/// A DeviceCheck key as the developer account issues one: an ES256 (P-256) private key, its 10-character key id and the
/// team id. A server signs each DeviceCheck request's bearer token with it. The stand-in hands the private key out
/// (`GET /devicecheck/key`), as it does the In-App Purchase key: never use a key it generated anywhere else.
public struct DevDeviceCheckKey: Sendable {
    /// The key id: the token header's `kid`.
    public let keyId: String
    /// The team id: the token's `iss`.
    public let teamId: String
    /// The private key.
    public let privateKey: P256.Signing.PrivateKey

    /// The private key as the `.p8` download holds it (PEM, PKCS#8).
    public var privateKeyPEM: String { privateKey.pemRepresentation }

    /// A key with the given ids.
    public init(keyId: String, teamId: String, privateKey: P256.Signing.PrivateKey) {
        self.keyId = keyId
        self.teamId = teamId
        self.privateKey = privateKey
    }

    /// A new key with a random key id and team id.
    public static func generate() -> DevDeviceCheckKey {
        DevDeviceCheckKey(keyId: DevServerAPIKey.randomId(), teamId: DevServerAPIKey.randomId(), privateKey: P256.Signing.PrivateKey())
    }
}

/// DeviceCheck's per-device data as Apple keeps it, for one team: two bits a device, set by the team's server and read
/// back across reinstalls, with the month of their last change on the stand-in's clock.
///
/// A device is named by tests (`"iPhone A"`); ``deviceToken(for:)`` mints what `DCDevice.generateToken()` would give its
/// app: a new opaque token at every call (a random nonce, the device's name sealed with AES-GCM under a key of this
/// stand-in, and GCM's tag), each resolving to the same device. A token not sealed by this stand-in — forged, altered,
/// another stand-in's — resolves to none, as Apple refuses it.
public final class DevDeviceCheck: Sendable {
    /// The key requests must be signed with.
    public let key: DevDeviceCheckKey
    /// The oldest an authorization token may be (Apple: one hour).
    public static let maximumTokenAge: TimeInterval = 3_600
    /// How far in the future a token's `iat` may be (clock skew).
    public static let allowedSkew: TimeInterval = 60

    private let clock: any TallyClock
    private let sealing = SymmetricKey(size: .bits256)
    private let bits = Mutex<[String: DevDeviceBits]>([:])

    /// A stand-in checking tokens signed with `key` (nil: a new one), reading time from `clock`.
    public init(key: DevDeviceCheckKey? = nil, clock: any TallyClock) {
        self.key = key ?? .generate()
        self.clock = clock
    }

    /// The stand-in's clock's now.
    var now: Date { clock.now }

    // MARK: Devices

    /// A new device token for `device` (base64), different from every other, resolving to `device`.
    public func deviceToken(for device: String) throws -> String {
        guard !device.isEmpty, device.utf8.count <= 200 else {
            throw DevAppStore.Failure(code: "bad_request", message: "a device is named by 1 to 200 bytes", status: 400)
        }
        guard let sealed = try AES.GCM.seal(Data(device.utf8), using: sealing).combined else {
            throw DevAppStore.Failure(code: "internal", message: "the device token could not be sealed", status: 500)
        }
        return sealed.base64EncodedString()
    }

    /// The device `deviceToken` names; nil when this stand-in did not mint it.
    public func device(of deviceToken: String) -> String? {
        guard let data = Data(base64Encoded: deviceToken), let box = try? AES.GCM.SealedBox(combined: data),
            let name = try? AES.GCM.open(box, using: sealing)
        else { return nil }
        return String(data: name, encoding: .utf8)
    }

    /// The bits of `device`; nil when never set.
    public func bits(of device: String) -> DevDeviceBits? { bits.withLock { $0[device] } }

    /// Sets the bits given of `device` (a bit never set is false) and stamps the month of the stand-in's clock; with
    /// neither given, nothing changes.
    public func update(_ device: String, bit0: Bool?, bit1: Bool?) {
        guard bit0 != nil || bit1 != nil else { return }
        let month = Self.month(of: clock.now)
        bits.withLock { bits in
            var current = bits[device] ?? DevDeviceBits(bit0: false, bit1: false, lastUpdateTime: month)
            if let bit0 { current.bit0 = bit0 }
            if let bit1 { current.bit1 = bit1 }
            current.lastUpdateTime = month
            bits[device] = current
        }
    }

    /// `YYYY-MM` of `date`, in UTC.
    static func month(of date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        let parts = calendar.dateComponents([.year, .month], from: date)
        let month = parts.month ?? 1
        return "\(parts.year ?? 1970)-\(month < 10 ? "0" : "")\(month)"
    }

    // MARK: Authorization

    /// Apple's refusal of the `Authorization` header `authorization` at `now`, or nil when it is good: `Bearer <JWT>`
    /// (else 400 "Missing or badly formatted authorization token"); header `alg` ES256 and `kid` the key id, an ES256
    /// signature by the key, `iat` at most an hour old and at most a minute ahead (else 401 "Unable to verify
    /// authorization token"); `iss` the team id (else 403: a token of another team).
    func refusal(of authorization: String?, now: Date) -> DevDeviceCheckRefusal? {
        guard let authorization, let bearer = DevReceivedJWS.bearerToken(authorization), let token = DevReceivedJWS(bearer) else {
            return .badAuthorization
        }
        guard let header = token.header, header.alg == "ES256", header.kid == key.keyId, let claims = token.claims(as: Claims.self),
            let iat = claims.iat, token.isSigned(by: key.privateKey.publicKey)
        else { return .unverified }
        let seconds = now.timeIntervalSince1970
        guard iat <= seconds + Self.allowedSkew, iat >= seconds - Self.maximumTokenAge else { return .unverified }
        guard claims.iss == key.teamId else { return .forbidden }
        return nil
    }

    private struct Claims: Decodable {
        var iss: String?
        var iat: Double?
    }
}

/// A device's bits as the stand-in keeps them.
public struct DevDeviceBits: Sendable, Hashable, Codable {
    /// The first bit.
    public var bit0: Bool
    /// The second bit.
    public var bit1: Bool
    /// The month of the last update, `YYYY-MM`.
    public var lastUpdateTime: String

    /// Bits last updated in `lastUpdateTime`.
    public init(bit0: Bool, bit1: Bool, lastUpdateTime: String) {
        self.bit0 = bit0
        self.bit1 = bit1
        self.lastUpdateTime = lastUpdateTime
    }
}

/// An answer Apple gives a DeviceCheck request it refuses: a status and a plain-text sentence.
struct DevDeviceCheckRefusal: Error, Sendable, Hashable {
    /// The HTTP status.
    let status: Int
    /// The text body.
    let message: String

    /// 400: no `Bearer` token, or not a compact JWS.
    static let badAuthorization = Self(status: 400, message: "Missing or badly formatted authorization token")
    /// 401: the token's key, signature or `iat` is wrong.
    static let unverified = Self(status: 401, message: "Unable to verify authorization token")
    /// 403: a good token of another team.
    static let forbidden = Self(status: 403, message: "Forbidden")
    /// 400: `device_token` missing, not a string, or not a token of this stand-in.
    static let badDeviceToken = Self(status: 400, message: "Missing or incorrectly formatted device token payload")
    /// 400: `timestamp` missing or not whole milliseconds.
    static let badTimestamp = Self(status: 400, message: "Missing or incorrectly formatted time stamp")
    /// 400: the body is not a JSON object, `transaction_id` is missing, a bit is not a boolean.
    static let badPayload = Self(status: 400, message: "Missing or incorrectly formatted payload")
}
