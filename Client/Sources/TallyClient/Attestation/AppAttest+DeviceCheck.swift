#if canImport(DeviceCheck)
import DeviceCheck
import Foundation

// Apple platforms only, and kept thin: Apple's services behind the SDK's protocols, their errors as AppAttestError. The
// rules are AttestationFlow's. What a device must still confirm: a key made, attested and asserting on a real iPhone
// (the simulator says isSupported false), DCError codes as mapped here, and a token DeviceCheck's server accepts.

extension AttestationConfiguration {
    /// App Attest through `DCAppAttestService.shared` and DeviceCheck through `DCDevice.current`, where the OS has them.
    static var appleServices: AttestationConfiguration? {
        guard #available(iOS 14.0, macOS 11.0, tvOS 15.0, watchOS 9.0, *) else { return nil }
        return AttestationConfiguration(appAttest: SystemAppAttestService(), deviceCheck: SystemDeviceTokenProvider())
    }
}

/// `DCAppAttestService.shared` as an ``AppAttestService``.
@available(iOS 14.0, macOS 11.0, tvOS 15.0, watchOS 9.0, *)
struct SystemAppAttestService: AppAttestService {
    var isSupported: Bool { DCAppAttestService.shared.isSupported }

    func generateKey() async throws -> String {
        try await AppAttestError.mapping { try await DCAppAttestService.shared.generateKey() }
    }

    func attestKey(_ keyId: String, clientDataHash: Data) async throws -> Data {
        try await AppAttestError.mapping { try await DCAppAttestService.shared.attestKey(keyId, clientDataHash: clientDataHash) }
    }

    func generateAssertion(_ keyId: String, clientDataHash: Data) async throws -> Data {
        try await AppAttestError.mapping {
            try await DCAppAttestService.shared.generateAssertion(keyId, clientDataHash: clientDataHash)
        }
    }
}

/// `DCDevice.current` as a ``DeviceTokenProvider``.
@available(iOS 11.0, macOS 10.15, tvOS 11.0, watchOS 9.0, *)
struct SystemDeviceTokenProvider: DeviceTokenProvider {
    var isSupported: Bool { DCDevice.current.isSupported }

    func generateToken() async throws -> Data {
        try await AppAttestError.mapping { try await DCDevice.current.generateToken() }
    }
}

@available(iOS 11.0, macOS 10.15, tvOS 11.0, watchOS 9.0, *)
extension AppAttestError {
    /// The code of a `DCError`; codes Apple adds later count as system failures.
    init(_ code: DCError.Code) {
        switch code {
        case .featureUnsupported: self = .featureUnsupported
        case .invalidInput: self = .invalidInput
        case .invalidKey: self = .invalidKey
        case .serverUnavailable: self = .serverUnavailable
        default: self = .unknownSystemFailure
        }
    }

    /// `body`'s result, its `DCError` thrown as an ``AppAttestError`` (any other error as it is).
    static func mapping<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as DCError {
            throw AppAttestError(error.code)
        }
    }
}
#endif
