import Foundation

/// App Attest as `DCAppAttestService` offers it: a key in the Secure Enclave, Apple's attestation of it, and assertions
/// signed with it. On Apple platforms the SDK adapts `DCAppAttestService.shared`
/// (``AttestationConfiguration/platformDefault``); tests and other platforms supply their own.
///
/// Errors are best thrown as ``AppAttestError`` (the SDK maps `DCError` to it): ``AppAttestError/invalidKey`` makes a
/// new key, ``AppAttestError/featureUnsupported`` stops attesting, anything else is tried again later.
public protocol AppAttestService: Sendable {
    /// Whether this device can attest (false on the simulator, older devices, most Macs): when false the SDK sends
    /// requests without attestation or assertions, and the server treats the installation as unattested.
    var isSupported: Bool { get }
    /// Creates a key pair and returns its id (`DCAppAttestService.generateKey()`).
    func generateKey() async throws -> String
    /// Asks Apple to attest the key, over `clientDataHash` (the SHA-256 of the server's challenge): the attestation
    /// object (`DCAppAttestService.attestKey(_:clientDataHash:)`).
    func attestKey(_ keyId: String, clientDataHash: Data) async throws -> Data
    /// Signs `clientDataHash` with the attested key: the assertion object
    /// (`DCAppAttestService.generateAssertion(_:clientDataHash:)`).
    func generateAssertion(_ keyId: String, clientDataHash: Data) async throws -> Data
}

/// DeviceCheck's per-device token, as `DCDevice` offers it: the server asks Apple for the device's two bits with it (did
/// this device already get its sign-up grant, across reinstalls).
public protocol DeviceTokenProvider: Sendable {
    /// Whether this device can make tokens (`DCDevice.isSupported`).
    var isSupported: Bool { get }
    /// A new ephemeral token (`DCDevice.generateToken()`).
    func generateToken() async throws -> Data
}

/// Why an ``AppAttestService`` or a ``DeviceTokenProvider`` failed: `DCError`'s codes.
public enum AppAttestError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The device or this app cannot use the service: the SDK goes on unattested.
    case featureUnsupported
    /// The input was malformed (a client data hash that is not 32 bytes).
    case invalidInput
    /// The key cannot be used: attested already, unknown after a restore to another device, or refused by Apple. The
    /// SDK makes a new key.
    case invalidKey
    /// Apple's App Attest service could not be reached: the SDK tries again later.
    case serverUnavailable
    /// Another failure of the system service: the SDK tries again later.
    case unknownSystemFailure

    /// The code's name, never a key id or a token.
    public var description: String {
        switch self {
        case .featureUnsupported: "App Attest: feature unsupported"
        case .invalidInput: "App Attest: invalid input"
        case .invalidKey: "App Attest: invalid key"
        case .serverUnavailable: "App Attest: Apple's service unavailable"
        case .unknownSystemFailure: "App Attest: unknown system failure"
        }
    }
}
