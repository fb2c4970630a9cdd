import Foundation

/// `POST /v1/auth/attestation/challenge`: a one-time challenge for an App Attest attestation, or the nonce of an
/// assertion on a request that has no idempotency key (a sign-in that merges a guest).
public struct AttestationChallenge: Codable, Hashable, Sendable {
    /// The challenge (base64url, no padding): hash its UTF-8 bytes with SHA-256 as the attestation's client data hash.
    public var challenge: String
    /// When the server stops accepting it (five minutes after it was issued); it is accepted once.
    public var expiresAt: Date

    /// Creates the challenge.
    public init(challenge: String, expiresAt: Date) {
        self.challenge = challenge
        self.expiresAt = expiresAt
    }
}

/// An App Attest attestation (`DCAppAttestService.attestKey(_:clientDataHash:)`), sent with a guest sign-in or to
/// `POST /v1/auth/attestation`.
public struct AppAttestation: Codable, Hashable, Sendable {
    /// The key's id as `DCAppAttestService.generateKey()` returns it (standard base64 of 32 bytes).
    public var keyId: String
    /// The attestation object (standard base64).
    public var attestation: String
    /// The challenge from `POST /v1/auth/attestation/challenge` whose SHA-256 was the client data hash.
    public var challenge: String

    /// Creates the attestation.
    public init(keyId: String, attestation: String, challenge: String) {
        self.keyId = keyId
        self.attestation = attestation
        self.challenge = challenge
    }
}

/// `POST /v1/auth/attestation`'s answer, and what `GET /v1/me` says about the caller's installation.
public struct AttestationStatus: Codable, Hashable, Sendable {
    /// The attested key's id (standard base64).
    public var keyId: String
    /// `production` or `development`: the App Attest environment the key was attested in.
    public var environment: String

    /// Creates the status.
    public init(keyId: String, environment: String) {
        self.keyId = keyId
        self.environment = environment
    }
}

/// The `X-Tally-Assertion` header: an App Attest assertion that a request spending free value (a free metered
/// action, a free AI generation, a sign-in merging a guest) comes from the attested app, over the request itself.
///
/// The client data the app asks `DCAppAttestService.generateAssertion(_:clientDataHash:)` to sign is
/// ``clientData(method:path:nonce:bodySHA256:)``; its nonce is the request's `Idempotency-Key`, or, for a request
/// without one, a challenge from `POST /v1/auth/attestation/challenge` carried in the header.
public struct AssertionHeader: Hashable, Sendable {
    /// The header's name.
    public static let name = "X-Tally-Assertion"

    /// The attested key's id (standard base64).
    public var keyId: String
    /// The assertion object (standard base64).
    public var assertion: String
    /// The challenge used as the nonce, for a request without an `Idempotency-Key`.
    public var challenge: String?

    /// Creates the header's value.
    public init(keyId: String, assertion: String, challenge: String? = nil) {
        self.keyId = keyId
        self.assertion = assertion
        self.challenge = challenge
    }

    /// The header's value: `keyId`, `assertion` and `challenge` joined by `.` (none of them contains one).
    public var value: String {
        ([keyId, assertion] + (challenge.map { [$0] } ?? [])).joined(separator: ".")
    }

    /// Reads a header's value; nil when it is not two or three non-empty parts.
    public init?(value: String) {
        let parts = value.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard (2...3).contains(parts.count), parts.allSatisfy({ !$0.isEmpty }) else { return nil }
        self.init(keyId: parts[0], assertion: parts[1], challenge: parts.count == 3 ? parts[2] : nil)
    }

    /// The bytes the assertion signs (their SHA-256 is the client data hash): a version line, the method, the path
    /// (without the query), the nonce and the lowercase hex SHA-256 of the body (of no bytes for an empty body).
    public static func clientData(method: String, path: String, nonce: String, bodySHA256: String) -> [UInt8] {
        Array("tally-assertion-v1\n\(method.uppercased())\n\(path)\n\(nonce)\n\(bodySHA256.lowercased())".utf8)
    }
}
