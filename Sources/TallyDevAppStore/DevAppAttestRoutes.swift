import Foundation
import Hummingbird
import NIOCore

/// The App Attest routes of `tally-dev dev-appstore`, over a ``DevAppAttest`` (mounted beside the App Store's by
/// ``buildDevAppStoreApplication(store:appleID:host:port:logger:onServerRunning:)``); bytes travel as standard base64:
///
/// - `GET /appattest/root.pem`: the App Attestation root a server under test must trust (PEM).
/// - `POST /appattest/keys` → `{keyId}`: a new device key.
/// - `POST /appattest/attest {keyId, clientDataHash, teamId, bundleId, environment}` → `{attestation}`;
///   `environment` is `production` or `development`.
/// - `POST /appattest/assert {keyId, clientDataHash}` → `{assertion}`.
///
/// An unknown key is 404 `unknown_key`; an assertion by a key never attested is 409 `not_attested`.
struct DevAppAttestAPI: Sendable {
    let appAttest: DevAppAttest
    /// The App Store's routes, whose JSON bodies and answers these share.
    let api: DevAppStoreAPI

    struct AttestBody: Decodable {
        var keyId: String
        var clientDataHash: String
        var teamId: String
        var bundleId: String
        var environment: DevAppAttest.Environment
    }

    struct AssertBody: Decodable {
        var keyId: String
        var clientDataHash: String
    }

    func add(to router: Router<BasicRequestContext>) {
        router.get("appattest/root.pem") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "application/x-pem-file"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: appAttest.rootCertificatePEM)))
        }
        router.post("appattest/keys") { _, _ in DevAppStoreAPI.json(["keyId": appAttest.generateKey()]) }
        router.post("appattest/attest") { request, _ in
            try await api.answer(request, as: AttestBody.self) { body in
                let attestation = try Self.failing {
                    try appAttest.attestKey(
                        body.keyId, clientDataHash: try Self.bytes(body.clientDataHash), teamId: body.teamId, bundleId: body.bundleId,
                        environment: body.environment)
                }
                return ["attestation": Data(attestation).base64EncodedString()]
            }
        }
        router.post("appattest/assert") { request, _ in
            try await api.answer(request, as: AssertBody.self) { body in
                let assertion = try Self.failing {
                    try appAttest.generateAssertion(body.keyId, clientDataHash: try Self.bytes(body.clientDataHash))
                }
                return ["assertion": Data(assertion).base64EncodedString()]
            }
        }
    }

    /// Standard base64 decoded, or a 400.
    static func bytes(_ base64: String) throws -> [UInt8] {
        guard let data = Data(base64Encoded: base64) else {
            throw DevAppStore.Failure(code: "bad_request", message: "clientDataHash is not base64", status: 400)
        }
        return Array(data)
    }

    /// `make`'s value, its ``DevAppAttest/Failure`` answered as the HTTP error it is.
    static func failing<T>(_ make: () throws -> T) throws -> T {
        do {
            return try make()
        } catch DevAppAttest.Failure.unknownKey(let keyId) {
            throw DevAppStore.Failure(code: "unknown_key", message: DevAppAttest.Failure.unknownKey(keyId).description, status: 404)
        } catch DevAppAttest.Failure.notAttested(let keyId) {
            throw DevAppStore.Failure(code: "not_attested", message: DevAppAttest.Failure.notAttested(keyId).description, status: 409)
        }
    }
}
