import Foundation
import TallyAPI

/// App Attest's rules, pure: which requests carry an assertion and over which nonce, the bytes each hash covers, how
/// a failure is handled and how long to wait before trying again. ``Attestor`` applies them.
///
/// The flow, per installation: one key, made at the first need and kept in the ``SecureStore`` beside the
/// installation secret (``keyItem``), so a new keychain makes a new one; a key id the keychain kept but the device lost
/// (a reinstall, a restore) fails with ``AppAttestError/invalidKey`` and is replaced. The key is attested at the first
/// guest sign-in (``GuestSignInRequest/attestation``, over a fresh challenge) and marked attested once the server
/// accepts it; when that could not be done (Apple's service down, an upgrade from an SDK without App Attest, a first
/// sign-in that was not a guest's) it is attested later with `POST /v1/auth/attestation`, with backoff. A refused
/// attestation (`installation_rejected`) or a key the device no longer has is dropped and a new key attested once
/// more. Then every request that spends free value carries `X-Tally-Assertion` (``nonce(for:)``); without an attested
/// key it goes without, and the server charges tokens for it or just records it, as it is configured.
enum AttestationFlow {
    /// The secure store item holding the installation's key (``Key``): never logged, never sent but as the key id.
    static let keyItem = "app-attest-key"

    /// The installation's App Attest key as the secure store keeps it.
    struct Key: Codable, Hashable, Sendable {
        /// The id `generateKey()` returned.
        var id: String
        /// Whether the server accepted an attestation of it: only then do requests carry assertions.
        var attested: Bool
    }

    // MARK: Assertions

    /// Where an assertion's nonce comes from.
    enum Nonce: Hashable, Sendable {
        /// The request's `Idempotency-Key`: it names the request already, and the server sees it.
        case idempotencyKey(String)
        /// A fresh challenge (`POST /v1/auth/attestation/challenge`), carried in the header: for requests without a key.
        case challenge
    }

    /// Which nonce `request`'s assertion is over, or nil when the request spends nothing free and carries none: a
    /// metered action (`POST /v1/actions/{name}`, over its `Idempotency-Key`), a daily AI generation
    /// (`GET /v1/ai/daily/{name}`) and a sign-in merging the calling guest (`POST /v1/auth/sign-in` or
    /// `POST /v1/auth/apple` with `"merge": true`), the last two over a challenge.
    static func nonce(for request: TransportRequest) -> Nonce? {
        let path = path(of: request)
        switch request.method.uppercased() {
        case "POST" where isSingleSegment(path, under: "/v1/actions/"):
            let key = request.headers.first { $0.key.caseInsensitiveCompare(TallyHeader.idempotencyKey) == .orderedSame }?.value
            return key.map(Nonce.idempotencyKey) ?? .challenge
        case "GET" where isSingleSegment(path, under: "/v1/ai/daily/"):
            return .challenge
        case "POST" where path == "/v1/auth/sign-in" || path == "/v1/auth/apple":
            return mergesGuest(request.body) ? .challenge : nil
        default:
            return nil
        }
    }

    /// The client data an assertion on `request` signs (``AssertionHeader/clientData(method:path:nonce:bodySHA256:)``):
    /// the method, the path as sent without its query, the nonce and the body's SHA-256.
    static func clientData(for request: TransportRequest, nonce: String) -> [UInt8] {
        AssertionHeader.clientData(
            method: request.method, path: path(of: request), nonce: nonce, bodySHA256: SHA256.hex(Array(request.body ?? Data())))
    }

    /// The client data hash `generateAssertion` is given for `request`: the SHA-256 of ``clientData(for:nonce:)``.
    static func assertionHash(for request: TransportRequest, nonce: String) -> Data {
        Data(SHA256.digest(clientData(for: request, nonce: nonce)))
    }

    /// The client data hash `attestKey` is given: the SHA-256 of the challenge's UTF-8 bytes.
    static func attestationHash(challenge: String) -> Data { Data(SHA256.digest(Array(challenge.utf8))) }

    /// The path of `request` without its query, as sent (percent-encoded).
    static func path(of request: TransportRequest) -> String {
        String(request.path.prefix { $0 != "?" })
    }

    private static func isSingleSegment(_ path: String, under prefix: String) -> Bool {
        guard path.hasPrefix(prefix) else { return false }
        let rest = path.dropFirst(prefix.count)
        return !rest.isEmpty && !rest.contains("/")
    }

    /// Whether a sign-in's JSON body asks to merge the calling guest.
    private static func mergesGuest(_ body: Data?) -> Bool {
        struct Merge: Decodable { var merge: Bool? }
        guard let body else { return false }
        return (try? JSONDecoder().decode(Merge.self, from: body))?.merge == true
    }

    // MARK: Failures

    /// What a failure to attest, or to assert, means for what follows.
    enum Failure: Hashable, Sendable {
        /// The key is unusable or was refused: drop it; the next attestation makes a new one.
        case invalidKey
        /// A passing failure (Apple's service, the network, the server, a locked keychain): try again later.
        case later
        /// The signed-in user left (401): the attestation waits for the next sign-in.
        case signedOut
        /// This device, or this server, does not do App Attest: nothing more is tried in this launch.
        case never
    }

    /// How `error`, from the service, the secure store or the server, is handled.
    static func classify(_ error: any Error) -> Failure {
        switch error {
        case let error as AppAttestError:
            switch error {
            case .invalidKey: return .invalidKey
            case .serverUnavailable, .unknownSystemFailure: return .later
            case .featureUnsupported, .invalidInput: return .never
            }
        case let error as ClientError:
            if isRejection(error) { return .invalidKey }
            switch error.code {
            case .unauthorized: return .signedOut
            case .offline, .timedOut, .rateLimited: return .later
            default:
                // No such route (a server without App Attest), or a request it will never take.
                if let status = error.status, (400..<500).contains(status), status != 408 { return .never }
                return .later
            }
        default:
            return .later
        }
    }

    /// Whether the server refused the attestation it was sent (`403 installation_rejected`).
    static func isRejection(_ error: any Error) -> Bool {
        (error as? ClientError)?.serverCode == .installationRejected
    }

    /// Seconds to wait before the next attempt after `failures` failures in a row: `first`, doubled each time, at most
    /// `maximum`.
    static func retryDelay(afterFailures failures: Int, first: TimeInterval, maximum: TimeInterval) -> TimeInterval {
        guard failures > 0 else { return 0 }
        return min(maximum, first * pow(2, Double(min(failures - 1, 30))))
    }
}
