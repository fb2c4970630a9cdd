import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Metrics
import TallyAPI
import TallyAppAttest
import TallyStore

/// App Attest and DeviceCheck on the server's side (docs/device-integrity.md): challenges,
/// attestations, assertions on the calls that spend free value, and the sign-up grant a device may have.
///
/// Verification is TallyAppAttest's; what must hold across processes is the store's (a challenge is used once, a key
/// attested once, a counter accepted once). Modes: `monitor` records each unattested spend — a metric
/// (`tally_attestation_verdicts_total`), a flag on the user (`unattested_spends`, on the console), a log line with the
/// rule's code only — and refuses nothing; `enforce` withholds the free value (the caller pays, or gets
/// `403 attestation_required`).
struct DeviceIntegrity: Sendable {
    /// Challenges, attested keys, counters and unattested spends.
    let store: any TallyStorage
    let clock: any TallyClock
    /// App Attest's settings, when configured.
    let appAttest: AppAttestConfiguration?
    /// DeviceCheck's settings, when configured.
    let deviceCheck: DeviceCheckConfiguration?
    /// The catalog's sign-up grant: what a guest is created with unless withheld.
    let signupGrant: Int64
    /// Where `tally_attestation_verdicts_total` is counted.
    let metrics: any MetricsFactory
    /// How long a challenge is accepted.
    static let challengeLifetime: TimeInterval = 300

    /// Whether a call's free value needs an assertion at all (App Attest configured and not off).
    var checksAssertions: Bool { (appAttest?.mode ?? .off) != .off }

    // MARK: Challenges and attestations

    /// A new one-time challenge, stored by its hash until ``challengeLifetime`` has passed.
    func issueChallenge() async throws -> AttestationChallenge {
        let challenge = Secrets.random(bytes: 32)
        let expiresAt = clock.now.addingTimeInterval(Self.challengeLifetime)
        try await store.issueAttestationChallenge(hash: Secrets.sha256(challenge), expiresAt: expiresAt)
        return AttestationChallenge(challenge: challenge, expiresAt: expiresAt)
    }

    /// Verifies `attestation` (using up its challenge first, so a refused one cannot be tried again with it) and
    /// returns the key to store; refusals are `403 installation_rejected` naming the rule, with nothing stored.
    func verify(_ attestation: AppAttestation, logger: Logger) async throws -> AttestedKey {
        guard let appAttest, appAttest.mode != .off else {
            throw APIError(.notFound, "This server does not verify App Attest attestations.")
        }
        guard let keyId = Data(base64Encoded: attestation.keyId), keyId.count == 32,
            let object = Data(base64Encoded: attestation.attestation), object.count <= AppAttestVerifier.maxAttestationBytes,
            (1...128).contains(attestation.challenge.utf8.count)
        else {
            throw APIError(.invalidField, "'attestation' needs a keyId (32 bytes, base64), an attestation (base64) and a challenge.")
        }
        let now = clock.now
        guard try await store.consumeAttestationChallenge(hash: Secrets.sha256(attestation.challenge), now: now) else {
            record("refused", reason: "challenge", logger: logger)
            throw APIError(.installationRejected, "The attestation's challenge is unknown, used or expired: ask for a new one.")
        }
        let key: AttestedKey
        do throws(AppAttestError) {
            key = try await appAttest.verifier.verifyAttestation(
                Array(object), keyId: Array(keyId), challenge: Array(attestation.challenge.utf8), at: now)
        } catch {
            record("refused", reason: error.code.rawValue, logger: logger)
            throw APIError(.installationRejected, "The attestation was refused: \(error.description).")
        }
        // Refused before a guest sign-in stores anything (``save(_:userId:installation:)`` refuses it again, atomically).
        guard try await store.attestedKey(keyId: attestation.keyId) == nil else {
            record("refused", reason: "key_reused", logger: logger)
            throw Self.keyReused
        }
        record("attested", reason: "ok", logger: nil)
        return key
    }

    /// The answer to a key attested before.
    static var keyReused: APIError { APIError(.installationRejected, "This key was attested before: generate a new key.") }

    /// Stores `key` for `userId`; a key attested before is refused (`403 installation_rejected`).
    func save(_ key: AttestedKey, userId: String, installation: String?) async throws -> AttestationStatus {
        let keyId = Data(key.keyId).base64EncodedString()
        let record = AttestedKeyRecord(
            keyId: keyId, userId: userId, installation: installation, publicKey: key.publicKey, environment: key.environment.rawValue,
            receipt: key.receipt, attestedAt: clock.now)
        guard try await store.saveAttestedKey(record) else { throw Self.keyReused }
        return AttestationStatus(keyId: keyId, environment: key.environment.rawValue)
    }

    // MARK: Assertions

    /// Whether `request` (by `userId`, with `body`) may spend free value: true when App Attest is off or in `monitor`
    /// (which records an unattested spend), or when it carries a valid `X-Tally-Assertion` by a key of `userId`'s. The
    /// nonce is the `Idempotency-Key` header, else the header's challenge (used up here).
    func allowsFreeValue(_ request: Request, userId: String, body: ByteBuffer?, logger: Logger) async throws -> Bool {
        guard let appAttest, appAttest.mode != .off else { return true }
        let failure = try await assertionFailure(request, userId: userId, body: body, verifier: appAttest.verifier)
        guard let failure else {
            record("attested", reason: "ok", logger: nil)
            return true
        }
        record(appAttest.refusesUnattested ? "refused" : "unattested", reason: failure, logger: logger)
        try await store.recordUnattestedSpend(userId: userId, reason: failure, now: clock.now)
        return !appAttest.refusesUnattested || appAttest.unattestedFreeUses
    }

    /// Why `request` carries no valid assertion by a key of `userId`'s (a short code), or nil when it does.
    private func assertionFailure(
        _ request: Request, userId: String, body: ByteBuffer?, verifier: AppAttestVerifier
    ) async throws -> String? {
        guard let value = request.headers[.tallyAssertion] else { return "missing" }
        guard let header = AssertionHeader(value: value), let assertion = Data(base64Encoded: header.assertion),
            assertion.count <= AppAttestVerifier.maxAssertionBytes
        else { return "malformed" }
        let nonce: String
        if let key = request.headers[.idempotencyKey] {
            nonce = key
        } else if let challenge = header.challenge, challenge.utf8.count <= 128 {
            guard try await store.consumeAttestationChallenge(hash: Secrets.sha256(challenge), now: clock.now) else {
                return "challenge"
            }
            nonce = challenge
        } else {
            return "no_nonce"
        }
        guard header.keyId.utf8.count <= 64, let key = try await store.attestedKey(keyId: header.keyId),
            key.userId == userId || key.accountId == userId
        else { return "unknown_key" }
        let bodyHash = body.map { buffer in buffer.withUnsafeReadableBytes { SHA256.hash(data: $0) } } ?? SHA256.hash(data: [UInt8]())
        let clientData = AssertionHeader.clientData(
            method: request.method.rawValue, path: request.uri.path, nonce: nonce, bodySHA256: bodyHash.map { String(format: "%02x", $0) }.joined())
        let counter: UInt32
        do throws(AppAttestError) {
            counter = try verifier.verifyAssertion(Array(assertion), clientData: clientData, publicKey: key.publicKey, storedCounter: key.counter)
        } catch {
            return error.code.rawValue
        }
        // Compare-and-set: of two processes accepting this counter, one raises it and the other sees a replay.
        guard try await store.advanceAssertionCounter(keyId: key.keyId, to: counter) else {
            return AppAttestError.Code.counterNotIncreased.rawValue
        }
        return nil
    }

    // MARK: Sign-up grant

    /// The sign-up grant a guest sign-in may create its guest with: the catalog's, unless App Attest or DeviceCheck
    /// (in `enforce`) withholds it — no valid attestation in this request, or the device's bit says it had one.
    func signupGrant(attested: Bool, deviceToken: String?, logger: Logger) async -> (grant: Int64, markDevice: String?) {
        let full = signupGrant
        guard full > 0 else { return (0, nil) }
        var grant = full
        if let appAttest, appAttest.refusesUnattested, !attested, !appAttest.unattestedSignupGrant { grant = 0 }
        guard let deviceCheck, deviceCheck.mode != .off else { return (grant, nil) }
        let enforce = deviceCheck.mode == .enforce
        guard let deviceToken else {
            record("devicecheck", reason: "missing", logger: nil)
            return (enforce ? 0 : grant, nil)
        }
        do {
            let bits = try await deviceCheck.client.queryTwoBits(deviceToken: deviceToken)
            let hadGrant = (deviceCheck.signupGrantBit == 0 ? bits?.bit0 : bits?.bit1) ?? false
            if hadGrant {
                record("devicecheck", reason: "had_signup_grant", logger: logger)
                return (enforce ? 0 : grant, nil)
            }
            return (grant, grant > 0 ? deviceToken : nil)
        } catch {
            record("devicecheck", reason: error.code.rawValue, logger: logger)
            if error.code == .unauthorized { logger.error("DeviceCheck refused the server's key: \(error.code.rawValue)") }
            return (enforce ? 0 : grant, nil)
        }
    }

    /// Sets the device's "had its sign-up grant" bit (after its guest was created with the grant); a failure is logged.
    func markSignupGrant(deviceToken: String, logger: Logger) async {
        guard let deviceCheck else { return }
        do {
            try await deviceCheck.client.updateTwoBits(
                deviceToken: deviceToken, bit0: deviceCheck.signupGrantBit == 0 ? true : nil,
                bit1: deviceCheck.signupGrantBit == 1 ? true : nil)
        } catch {
            logger.warning("DeviceCheck bit not set", metadata: ["tally.reason": .string(error.code.rawValue)])
        }
    }

    // MARK: Records

    /// Counts a verdict and, with `logger`, logs it by its code only (never a key, token or attestation).
    private func record(_ verdict: String, reason: String, logger: Logger?) {
        Counter(
            label: "tally_attestation_verdicts_total", dimensions: [("verdict", verdict), ("reason", reason)], factory: metrics
        ).increment()
        logger?.info("device integrity", metadata: ["tally.verdict": .string(verdict), "tally.reason": .string(reason)])
    }
}

extension HTTPField.Name {
    /// `X-Tally-Assertion`.
    static let tallyAssertion = HTTPField.Name(AssertionHeader.name)!
}
