import Foundation
import Hummingbird
import NIOCore
import TallyAPI

/// DeviceCheck's routes in `tally-dev dev-appstore`, over a ``DevDeviceCheck`` (mounted by
/// ``buildDevAppStoreApplication(store:appleID:host:port:logger:onServerRunning:)``).
///
/// Apple's, as `https://api.devicecheck.apple.com` serves them (a base URL a server points its DeviceCheck client at):
/// each `POST`, its `Authorization: Bearer <JWT>` checked first (``DevDeviceCheck/refusal(of:now:)``), then its JSON
/// body `{device_token, transaction_id, timestamp}`; errors are a status and one of Apple's plain-text sentences.
///
/// - `/v1/query_two_bits` → `{bit0, bit1, last_update_time}`, or 200 `Failed to find bit state` when never set.
/// - `/v1/update_two_bits` (with `bit0?`, `bit1?`) → 200, empty.
/// - `/v1/validate_device_token` → 200, empty.
///
/// And its controls: `GET /devicecheck/key` → `{keyId, teamId, privateKeyPEM}`; `POST /devicecheck/device-token
/// {device}` → `{deviceToken}`, a new token of the device so named (what `DCDevice.generateToken()` gives its app).
struct DevDeviceCheckRoutes: Sendable {
    /// The data served.
    let deviceCheck: DevDeviceCheck

    /// Adds the routes to `router`.
    func add(to router: Router<BasicRequestContext>) {
        router.get("devicecheck/key") { _, _ in
            let key = deviceCheck.key
            return DevAppStoreAPI.json(["keyId": key.keyId, "teamId": key.teamId, "privateKeyPEM": key.privateKeyPEM])
        }
        router.post("devicecheck/device-token") { request, _ in
            let bytes = try await request.body.collect(upTo: 64 * 1024)
            guard let body = try? JSONDecoder().decode([String: String].self, from: Data(bytes.readableBytesView)), let device = body["device"]
            else {
                return DevAppStoreAPI.error(DevAppStore.Failure(code: "bad_request", message: "the body is {\"device\": \"<name>\"}", status: 400))
            }
            do {
                return DevAppStoreAPI.json(["deviceToken": try deviceCheck.deviceToken(for: device)])
            } catch let failure as DevAppStore.Failure {
                return DevAppStoreAPI.error(failure)
            }
        }
        router.post("v1/query_two_bits") { request, _ in
            await answer(request) { device, _ in
                guard let bits = deviceCheck.bits(of: device) else { return Self.text(200, "Failed to find bit state") }
                return DevAppStoreAPI.json(Bits(bit0: bits.bit0, bit1: bits.bit1, last_update_time: bits.lastUpdateTime))
            }
        }
        router.post("v1/update_two_bits") { request, _ in
            await answer(request) { (device, body) throws(DevDeviceCheckRefusal) in
                let bit0 = try Self.bit("bit0", of: body)
                let bit1 = try Self.bit("bit1", of: body)
                deviceCheck.update(device, bit0: bit0, bit1: bit1)
                return Response(status: .ok)
            }
        }
        router.post("v1/validate_device_token") { request, _ in
            await answer(request) { _, _ in Response(status: .ok) }
        }
    }

    /// `query_two_bits`' answer.
    private struct Bits: Encodable {
        var bit0: Bool
        var bit1: Bool
        var last_update_time: String
    }

    /// Checks the request as Apple does — its token, then its body's `device_token`, `transaction_id` and `timestamp`
    /// — and answers with `serve(device, body)`, or with Apple's refusal.
    private func answer(
        _ request: Request, _ serve: (String, [String: DevJSONValue]) throws(DevDeviceCheckRefusal) -> Response
    ) async -> Response {
        if let refusal = deviceCheck.refusal(of: request.headers[.authorization], now: deviceCheck.now) { return Self.text(refusal) }
        guard let bytes = try? await request.body.collect(upTo: 64 * 1024),
            let body = try? JSONDecoder().decode([String: DevJSONValue].self, from: Data(bytes.readableBytesView))
        else { return Self.text(.badPayload) }
        guard case .string(let token)? = body["device_token"], let device = deviceCheck.device(of: token) else {
            return Self.text(.badDeviceToken)
        }
        guard case .string(let transaction)? = body["transaction_id"], !transaction.isEmpty else { return Self.text(.badPayload) }
        guard case .number(let timestamp)? = body["timestamp"], timestamp > 0, timestamp == timestamp.rounded() else {
            return Self.text(.badTimestamp)
        }
        do {
            return try serve(device, body)
        } catch {
            return Self.text(error)
        }
    }

    /// The member `name` of an update: nil when absent, a refusal when not a boolean.
    private static func bit(_ name: String, of body: [String: DevJSONValue]) throws(DevDeviceCheckRefusal) -> Bool? {
        switch body[name] {
        case nil: return nil
        case .bool(let value)?: return value
        default: throw .badPayload
        }
    }

    private static func text(_ refusal: DevDeviceCheckRefusal) -> Response { text(refusal.status, refusal.message) }

    private static func text(_ status: Int, _ message: String) -> Response {
        Response(
            status: .init(code: status), headers: [.contentType: "text/plain; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: message)))
    }
}
