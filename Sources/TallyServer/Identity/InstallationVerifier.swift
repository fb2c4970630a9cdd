/// The seam where a guest sign-in's installation would be verified — with App Attest or DeviceCheck —
/// before it is trusted (README, "Guests and installations"). Set one in
/// ``TallyConfiguration/installationVerifier``; the default, ``AcceptEveryInstallation``, verifies nothing,
/// which is what a random device secret alone allows.
///
/// `POST /v1/auth/guest` asks it once the body is valid and the per-device rate limit has passed, before the
/// store looks the installation up: a rejection is `403 installation_rejected` and stores nothing. A verifier
/// that cannot decide (its service is down) answers by its own policy, and logs what it needs to (never the
/// attestation).
public protocol InstallationVerifier: Sendable {
    /// Whether `claim` may sign in as its installation's guest (or create one).
    func verify(_ claim: InstallationClaim) async -> InstallationVerdict
}

/// What a guest sign-in says about its installation.
public struct InstallationClaim: Sendable, Hashable {
    /// The installation's id: the SHA-256 (hex) of the device secret, as the store keys it.
    public var installation: String
    /// What the client sent beside the secret (`attestation` in the request), if anything.
    public var attestation: String?

    /// Creates a claim.
    public init(installation: String, attestation: String?) {
        self.installation = installation
        self.attestation = attestation
    }
}

/// An ``InstallationVerifier``'s answer.
public enum InstallationVerdict: Sendable, Hashable {
    /// Sign the installation's guest in.
    case accept
    /// Refuse with `403 installation_rejected`.
    case reject
}

/// The default verifier: accepts every installation, with or without an attestation.
public struct AcceptEveryInstallation: InstallationVerifier {
    /// Creates the verifier.
    public init() {}

    /// Accepts.
    public func verify(_ claim: InstallationClaim) async -> InstallationVerdict { .accept }
}
