import Foundation
import TallyAPI

/// How a client proves that its requests come from a genuine copy of the app on a real device
/// (``ClientConfiguration/attestation``): App Attest for the installation and the requests that spend free value, and
/// DeviceCheck's token at the guest sign-in (so the server knows a device that already had its sign-up grant).
///
/// With nil (Linux's default), or on a device that supports neither, nothing is attested: requests go without
/// assertions, and a server that enforces App Attest charges tokens for what would have been free (or, in its monitor
/// mode, just records it).
public struct AttestationConfiguration: Sendable {
    /// The App Attest service; nil attests nothing.
    public var appAttest: (any AppAttestService)?
    /// DeviceCheck's tokens; nil sends none.
    public var deviceCheck: (any DeviceTokenProvider)?
    /// Seconds before retrying an attestation that failed for a passing reason (Apple's service or the network
    /// down); doubled at each failure in a row, up to ``maxRetryDelay``. The client's clock times it.
    public var retryDelay: TimeInterval
    /// The longest wait between two attempts at an attestation, in seconds.
    public var maxRetryDelay: TimeInterval

    /// A configuration with these services; retries after 30 s, doubling up to an hour.
    public init(
        appAttest: (any AppAttestService)?, deviceCheck: (any DeviceTokenProvider)? = nil, retryDelay: TimeInterval = 30,
        maxRetryDelay: TimeInterval = 3600
    ) {
        self.appAttest = appAttest
        self.deviceCheck = deviceCheck
        self.retryDelay = retryDelay
        self.maxRetryDelay = maxRetryDelay
    }

    /// The platform's services, ``ClientConfiguration``'s default: on Apple platforms App Attest through
    /// `DCAppAttestService.shared` (used when the device supports it) and DeviceCheck through `DCDevice.current`
    /// (iOS 14, macOS 11, tvOS 15, watchOS 9 and later); nil elsewhere.
    public static var platformDefault: AttestationConfiguration? {
        #if canImport(DeviceCheck)
        appleServices
        #else
        nil
        #endif
    }
}

/// This installation's App Attest state (``Client/attestation``). The client attests by itself — at the first guest
/// sign-in, and after a sign-in or a restored session whose installation is not attested yet, retrying with backoff —
/// and adds `X-Tally-Assertion` to the requests that spend free value (metered actions, daily AI generations, sign-ins
/// merging a guest). ``attest()`` is for an app that wants to know, or to attest at a moment of its choosing.
public struct AttestationClient: Sendable {
    let client: Client

    /// Whether this client attests: App Attest is configured and this device supports it. False on the simulator, on
    /// devices without the Secure Enclave's support, on most Macs, and on Linux.
    public var isSupported: Bool { client.attestor?.isSupported ?? false }

    /// Makes sure the server holds an attestation of this installation's key, attesting it now for the signed-in user
    /// (`POST /v1/auth/attestation`) when it does not.
    ///
    /// - Returns: true when the installation is attested, false when this device, client or server cannot attest
    ///   (requests then go unattested).
    /// - Throws: ``ClientError/Code/unauthorized`` when no one is signed in, another ``ClientError`` when the server
    ///   could not be reached or refused the attestation (`installation_rejected`: the key is dropped, and the next
    ///   call attests a new one), or an ``AppAttestError`` from the device.
    @discardableResult
    public func attest() async throws -> Bool {
        guard let attestor = client.attestor else { return false }
        return try await attestor.attestNow(auth: client.userTokens())
    }
}

extension Client {
    /// This installation's App Attest state: whether the device attests, and ``AttestationClient/attest()``.
    public var attestation: AttestationClient { AttestationClient(client: self) }
}
