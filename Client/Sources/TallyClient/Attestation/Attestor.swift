import Foundation
import TallyAPI

/// Signs each attempt of a request as it is sent (``RequestExecutor``): App Attest's assertion, on the requests that
/// spend free value.
protocol RequestSigner: Sendable {
    /// Sends one attempt with `send`: `request` with the headers that prove where it comes from added, or as it is. The
    /// signer may make the attempt wait its turn, and holds it until `send` returns or throws (the server's answer).
    func withSigned<T>(_ request: TransportRequest, _ send: (TransportRequest) async throws -> T) async throws -> T
}

/// Does App Attest and DeviceCheck for one client, by ``AttestationFlow``'s rules: keeps the installation's key, attests
/// it at the guest sign-in or later with backoff on the client's clock, and signs the requests that spend free value.
/// A device that cannot attest (``AppAttestService/isSupported`` false) sends everything unattested. Nothing here is
/// logged: key ids, attestations, assertions and tokens go to the server only.
actor Attestor: RequestSigner {
    private let service: (any AppAttestService)?
    private let deviceCheck: (any DeviceTokenProvider)?
    private let store: any SecureStore
    private let clock: any TallyClock
    /// Sends challenges and attestations: one attempt, never signed.
    private let executor: RequestExecutor
    private let retryDelay: TimeInterval
    private let maxRetryDelay: TimeInterval

    /// Set once this device or the server turned out unable to attest, or refused two keys in a row: nothing more is
    /// tried in this launch.
    private var stopped = false
    /// Attempts that failed in a row, which set the wait before the next.
    private var failures = 0
    /// Attestations the server refused in a row: at the second, attesting stops for this launch.
    private var rejections = 0
    /// The attestation retried in the background (``attestInBackground(auth:)``), and the tokens it sends.
    private var retrying: Task<Void, Never>?
    private var retryAuth: (any AccessTokenProvider)?
    /// The key being made, which concurrent callers share.
    private var keyCreation: Task<String, any Error>?
    /// Held over each asserted attempt until its answer: the counters reach the server in order (``withSigned(_:_:)``).
    private let assertionGate = AssertionGate()

    init(configuration: AttestationConfiguration, secureStore: any SecureStore, clock: any TallyClock, executor: RequestExecutor) {
        service = configuration.appAttest
        deviceCheck = configuration.deviceCheck
        store = secureStore
        self.clock = clock
        self.executor = executor
        retryDelay = configuration.retryDelay
        maxRetryDelay = configuration.maxRetryDelay
    }

    /// The client's attestor, when its configuration has one: its requests go through `transport` with one attempt each.
    static func make(_ configuration: ClientConfiguration, transport: any HTTPTransport) -> Attestor? {
        guard let attestation = configuration.attestation, attestation.appAttest != nil || attestation.deviceCheck != nil
        else { return nil }
        let executor = RequestExecutor(
            transport: transport, clock: configuration.clock, retry: .none, timeouts: configuration.timeouts,
            metrics: configuration.metrics, random: configuration.random)
        return Attestor(
            configuration: attestation, secureStore: configuration.secureStore, clock: configuration.clock, executor: executor)
    }

    /// Whether App Attest is configured and this device supports it.
    nonisolated var isSupported: Bool { service?.isSupported ?? false }

    // MARK: Guest sign-in

    /// Signs in as the guest of `deviceId` with `send`, carrying a DeviceCheck token when the device makes one and,
    /// until the server accepted one, an attestation of the installation's key. When the server refuses the
    /// attestation (`installation_rejected`) the key is dropped and a new one attested once more; after a second
    /// refusal, or when no attestation could be made now, the sign-in goes unattested (the attestation is then
    /// retried after the sign-in, ``attestInBackground(auth:)``).
    func signInAsGuest(
        deviceId: String, send: @Sendable (GuestSignInRequest) async throws -> SessionTokens
    ) async throws -> SessionTokens {
        let token = await deviceToken()
        for _ in 1...2 {
            guard let attestation = await attestationForSignIn() else { break }
            do {
                let tokens = try await send(GuestSignInRequest(deviceId: deviceId, attestation: attestation, deviceCheckToken: token))
                accepted(attestation.keyId)
                return tokens
            } catch where AttestationFlow.isRejection(error) {
                failed(error)  // the key is dropped: the next turn attests a new one
            }
        }
        return try await send(GuestSignInRequest(deviceId: deviceId, deviceCheckToken: token))
    }

    /// An attestation for the guest sign-in, or nil when none is needed (the key is attested) or none can be made now.
    private func attestationForSignIn() async -> AppAttestation? {
        guard let service, service.isSupported, !stopped else { return nil }
        do {
            if try storedKey()?.attested == true { return nil }
            return try await attest(with: service)
        } catch {
            failed(error)
            return nil
        }
    }

    private func deviceToken() async -> String? {
        guard let deviceCheck, deviceCheck.isSupported else { return nil }
        return try? await deviceCheck.generateToken().base64EncodedString()
    }

    // MARK: Later attestation

    /// Attests the installation's key now, for the user `auth` acts for (`POST /v1/auth/attestation`), unless the
    /// server has it already. Returns false when this device or the server cannot attest.
    func attestNow(auth: any AccessTokenProvider) async throws -> Bool {
        guard let service, service.isSupported, !stopped else { return false }
        do {
            if try storedKey()?.attested == true { return true }
            _ = try await auth.accessToken()  // someone is signed in: an attestation is not made for nothing
            let attestation = try await attest(with: service)
            _ = try await executor.send(.post("/v1/auth/attestation"), body: try TallyJSON.encoder().encode(attestation), auth: auth)
            accepted(attestation.keyId)
            return true
        } catch {
            failed(error)
            throw error
        }
    }

    /// Attests the key in a task of its own when it is not attested yet, for the user `auth` acts for (a sign-in, a
    /// restored session): at once after no failure, else after the backoff the failures so far set (on the client's
    /// clock), until it is attested, the user leaves, or the device or server turns out unable. Replaces the task
    /// started for an earlier user.
    func attestInBackground(auth: any AccessTokenProvider) {
        retryAuth = auth
        guard isSupported, !stopped, (try? storedKey())?.attested != true else { return }
        retrying?.cancel()
        retrying = Task { await self.keepAttesting(auth) }
    }

    private func keepAttesting(_ auth: any AccessTokenProvider) async {
        while !Task.isCancelled, !stopped {
            if failures > 0 {
                let delay = AttestationFlow.retryDelay(afterFailures: failures, first: retryDelay, maximum: maxRetryDelay)
                do { try await clock.sleep(for: delay) } catch { return }
            }
            do {
                _ = try await attestNow(auth: auth)
                return
            } catch {
                if Task.isCancelled || AttestationFlow.classify(error) == .signedOut { return }
            }
        }
    }

    /// Waits for the background attestation, if one runs (tests).
    func backgroundFinished() async { await retrying?.value }

    // MARK: Assertions

    /// Sends `request` with `send`, with `X-Tally-Assertion` when it spends free value (``AttestationFlow/nonce(for:)``)
    /// and the key is attested; as it is otherwise, or when the device fails to sign (the server then decides). A
    /// challenge the server could not give fails the request. Other requests pass at once, without the actor.
    ///
    /// Asserted attempts go one at a time, first come first served: each waits for the previous one's answer (or its
    /// failure, or cancellation) before its assertion is made. The server accepts an assertion only if its counter is
    /// above the last one it accepted, and every assertion raises the device's counter: two in flight at once could
    /// arrive in the other order, and the later-signed one, accepted first, would get the other refused
    /// (`counter_not_increased`), losing its free use. A task cancelled while it waits leaves the queue at once.
    nonisolated func withSigned<T>(_ request: TransportRequest, _ send: (TransportRequest) async throws -> T) async throws -> T {
        guard let nonce = AttestationFlow.nonce(for: request), isSupported else { return try await send(request) }
        try await assertionGate.enter()
        var holding = true
        defer { if holding { assertionGate.leave() } }
        let signed = try await asserted(request, over: nonce)
        if signed.headers[AssertionHeader.name] == nil {
            // Going unasserted (no attested key yet, a device that failed to sign): no counter to keep in order.
            holding = false
            assertionGate.leave()
        }
        return try await send(signed)
    }

    /// Returns once `count` asserted attempts wait for the one in flight, or the caller is cancelled (tests).
    nonisolated func waitForQueuedAssertions(_ count: Int) async { await assertionGate.waitForWaiters(count) }

    private func asserted(_ request: TransportRequest, over nonce: AttestationFlow.Nonce) async throws -> TransportRequest {
        guard let service, service.isSupported, !stopped, let key = try? storedKey(), key.attested else { return request }
        let (nonceText, challenge): (String, String?)
        switch nonce {
        case .idempotencyKey(let value): (nonceText, challenge) = (value, nil)
        case .challenge:
            let fresh = try await self.challenge().challenge
            (nonceText, challenge) = (fresh, fresh)
        }
        do {
            let hash = AttestationFlow.assertionHash(for: request, nonce: nonceText)
            let assertion = try await service.generateAssertion(key.id, clientDataHash: hash)
            var signed = request
            signed.headers[AssertionHeader.name] =
                AssertionHeader(keyId: key.id, assertion: assertion.base64EncodedString(), challenge: challenge).value
            return signed
        } catch {
            try Task.checkCancellation()
            if AttestationFlow.classify(error) == .invalidKey {
                // A key the device lost (the app reinstalled, a restore to another device): a new one, attested at once.
                forgetKey()
                if let retryAuth { attestInBackground(auth: retryAuth) }
            } else {
                failed(error)
            }
            return request
        }
    }

    // MARK: Key and attestation

    /// A new attestation of the installation's key (made first if there is none), over a fresh challenge. A key the
    /// service refuses (``AppAttestError/invalidKey``: attested already, or lost) is replaced by a new one, once.
    private func attest(with service: any AppAttestService) async throws -> AppAttestation {
        let challenge = try await challenge().challenge
        let hash = AttestationFlow.attestationHash(challenge: challenge)
        var keyId = try await key(with: service)
        let object: Data
        do {
            object = try await service.attestKey(keyId, clientDataHash: hash)
        } catch where AttestationFlow.classify(error) == .invalidKey {
            forgetKey()
            keyId = try await key(with: service)
            object = try await service.attestKey(keyId, clientDataHash: hash)
        }
        return AppAttestation(keyId: keyId, attestation: object.base64EncodedString(), challenge: challenge)
    }

    /// The stored key's id, or a new key's (stored unattested); callers at once share one new key.
    private func key(with service: any AppAttestService) async throws -> String {
        if let stored = try storedKey() { return stored.id }
        if let keyCreation { return try await keyCreation.value }
        let creation = Task { try await service.generateKey() }
        keyCreation = creation
        defer { keyCreation = nil }
        let id = try await creation.value
        if try storedKey() == nil { try write(AttestationFlow.Key(id: id, attested: false)) }
        return id
    }

    private func challenge() async throws -> AttestationChallenge {
        let response = try await executor.send(.post("/v1/auth/attestation/challenge", authenticated: false), auth: nil)
        return try decodeAnswer(AttestationChallenge.self, response.body)
    }

    /// The server accepted an attestation of `keyId`.
    private func accepted(_ keyId: String) {
        (failures, rejections) = (0, 0)
        guard let stored = try? storedKey(), stored.id == keyId else { return }
        try? write(AttestationFlow.Key(id: keyId, attested: true))
    }

    /// Counts a failure and acts on it (``AttestationFlow/classify(_:)``).
    private func failed(_ error: any Error) {
        guard !(error is CancellationError) else { return }
        switch AttestationFlow.classify(error) {
        case .invalidKey:
            forgetKey()
            failures += 1
            if AttestationFlow.isRejection(error) {
                rejections += 1
                if rejections >= 2 { stopped = true }
            }
        case .later:
            failures += 1
        case .never:
            stopped = true
        case .signedOut:
            break
        }
    }

    /// Forgets the installation's key (refused, or lost): the next attestation makes a new one.
    private func forgetKey() {
        try? store.delete(AttestationFlow.keyItem)
    }

    /// Forgets the key and stops the background attestation: the account was deleted.
    func forgetInstallation() {
        retrying?.cancel()
        forgetKey()
    }

    private func storedKey() throws -> AttestationFlow.Key? {
        guard let data = try store.read(AttestationFlow.keyItem) else { return nil }
        return try? JSONDecoder().decode(AttestationFlow.Key.self, from: data)
    }

    private func write(_ key: AttestationFlow.Key) throws {
        try store.write(try JSONEncoder().encode(key), for: AttestationFlow.keyItem)
    }
}
