import Foundation
import Hummingbird
import NIOCore
import TallyAppleID

/// The Sign in with Apple routes of `tally-dev dev-appstore`, over a ``DevAppleID`` (mounted beside the App Store's by
/// ``buildDevAppStoreApplication(store:appleID:host:port:logger:onServerRunning:)``):
///
/// - `GET /auth/keys`: the key set, as Apple's `https://appleid.apple.com/auth/keys`.
/// - `POST /auth/keys/rotate {dropOld?}` → `{kid, keys}`: a new signing key (the old ones kept unless `dropOld`).
/// - `POST /auth/identity-token {sub?, email?, isPrivateEmail?, nonce?, audience?, expiresIn?, defect?}` →
///   `{identityToken, authorizationCode, sub}`; `nonce` is the raw nonce (the token carries its SHA-256 hex), `defect`
///   one of ``DevAppleIDDefect``'s raw values.
/// - `POST /auth/token` and `POST /auth/revoke`: Apple's endpoints (form bodies, OAuth answers `{"error": …}`).
/// - `GET /auth/revoked` → `{revoked: [...]}`; `GET /auth/exchanges` → `{exchanges: [...]}`.
/// - `POST /auth/notifications {type, sub, email?, isPrivateEmail?, defect?, send?}` → `{notification, delivery?}`:
///   signs an account notification and, unless `send` is false, posts it once to the webhook, answering the outcome.
/// - `GET /auth/deliveries` → `{deliveries: [...]}`.
struct DevAppleIDAPI: Sendable {
    let appleID: DevAppleID
    /// The App Store's routes, whose JSON bodies and answers these share.
    let api: DevAppStoreAPI

    func add(to router: Router<BasicRequestContext>) {
        router.get("auth/keys") { _, _ in DevAppStoreAPI.json(appleID.jwks(counting: true)) }
        router.post("auth/keys/rotate") { request, _ in
            try await api.answer(request, as: RotateBody.self) { body in
                let kid = try appleID.rotateKeys(dropOld: body.dropOld ?? false)
                return RotateAnswer(kid: kid, keys: appleID.jwks().keys.map(\.kid))
            }
        }
        router.post("auth/identity-token") { request, _ in
            try await api.answer(request, as: IdentityTokenBody.self) { body in
                let defect = try Self.defect(body.defect)
                if let expiresIn = body.expiresIn, expiresIn <= 0 {
                    throw DevAppStore.Failure(code: "bad_request", message: "expiresIn must be positive", status: 400)
                }
                return try await appleID.identityToken(
                    sub: body.sub, email: body.email, isPrivateEmail: body.isPrivateEmail, nonce: body.nonce, audience: body.audience,
                    expiresIn: body.expiresIn, defect: defect)
            }
        }
        router.post("auth/token") { request, _ in
            await oauth(request, as: TokenForm.self) { form throws(DevAppleID.OAuthFailure) in
                try await appleID.exchange(clientId: form.client_id, clientSecret: form.client_secret, code: form.code, grantType: form.grant_type)
            }
        }
        router.post("auth/revoke") { request, _ in
            await oauth(request, as: RevokeForm.self) { form throws(DevAppleID.OAuthFailure) in
                try await appleID.revoke(
                    clientId: form.client_id, clientSecret: form.client_secret, token: form.token, tokenTypeHint: form.token_type_hint)
                return Empty()
            }
        }
        router.get("auth/revoked") { _, _ in DevAppStoreAPI.json(["revoked": appleID.revocations]) }
        router.get("auth/exchanges") { _, _ in DevAppStoreAPI.json(["exchanges": appleID.exchanges]) }
        router.post("auth/notifications") { request, _ in
            try await api.answer(request, as: NotificationBody.self) { body in
                guard !body.type.isEmpty, !body.sub.isEmpty else {
                    throw DevAppStore.Failure(code: "bad_request", message: "type and sub must be set", status: 400)
                }
                let notification = try await appleID.notification(
                    type: body.type, sub: body.sub, email: body.email, isPrivateEmail: body.isPrivateEmail, defect: try Self.defect(body.defect))
                guard body.send ?? true else { return NotificationAnswer(notification: notification, delivery: nil) }
                guard appleID.webhook != nil else {
                    throw DevAppStore.Failure(code: "no_webhook", message: "start with --apple-id-webhook URL to send notifications", status: 409)
                }
                return NotificationAnswer(notification: notification, delivery: await appleID.deliver(notification))
            }
        }
        router.get("auth/deliveries") { _, _ in DevAppStoreAPI.json(["deliveries": appleID.deliveries]) }
    }

    /// The defect a body names, if any; an unknown name is a 400.
    static func defect(_ name: String?) throws -> DevAppleIDDefect? {
        guard let name else { return nil }
        guard let defect = DevAppleIDDefect(rawValue: name) else {
            throw DevAppStore.Failure(
                code: "bad_request", message: "defect is one of \(DevAppleIDDefect.allCases.map(\.rawValue).joined(separator: ", "))", status: 400)
        }
        return defect
    }

    struct RotateBody: Decodable {
        var dropOld: Bool?
    }

    struct RotateAnswer: Encodable {
        var kid: String
        var keys: [String]
    }

    struct IdentityTokenBody: Decodable {
        var sub: String?
        var email: String?
        var isPrivateEmail: Bool?
        var nonce: String?
        var audience: String?
        var expiresIn: Double?
        var defect: String?
    }

    struct NotificationBody: Decodable {
        var type: String
        var sub: String
        var email: String?
        var isPrivateEmail: Bool?
        var defect: String?
        var send: Bool?
    }

    struct NotificationAnswer: Encodable {
        var notification: DevAppleID.Notification
        var delivery: DevAppleID.Delivery?
    }

    struct TokenForm: Decodable {
        var client_id: String?
        var client_secret: String?
        var code: String?
        var grant_type: String?
    }

    struct RevokeForm: Decodable {
        var client_id: String?
        var client_secret: String?
        var token: String?
        var token_type_hint: String?
    }

    struct Empty: Encodable {}

    /// Decodes a form body as Apple's endpoints take it, runs `make`, answers its value (an empty object answers an
    /// empty 200, as `/auth/revoke` does) or Apple's OAuth error `{"error": …}`.
    func oauth<Form: Decodable>(
        _ request: Request, as _: Form.Type, _ make: (Form) async throws(DevAppleID.OAuthFailure) -> some Encodable
    ) async -> Response {
        guard let bytes = try? await request.body.collect(upTo: 64 * 1024),
            let form = try? URLEncodedFormDecoder().decode(Form.self, from: String(decoding: bytes.readableBytesView, as: UTF8.self))
        else { return DevAppStoreAPI.json(["error": "invalid_request"], status: .badRequest) }
        do {
            let value = try await make(form)
            if value is Empty { return Response(status: .ok) }
            return DevAppStoreAPI.json(value)
        } catch {
            return DevAppStoreAPI.json(["error": error.error], status: HTTPResponse.Status(code: error.status))
        }
    }
}
