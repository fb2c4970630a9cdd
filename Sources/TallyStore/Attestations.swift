import Foundation

/// App Attest's server-side state (docs/device-integrity.md): one-time challenges, each
/// installation's attested keys with the counter of their last accepted assertion, and each user's unattested spends
/// (what `monitor` mode flags). The verification itself is TallyAppAttest's; the store keeps what must hold across
/// processes: a challenge is used once, a key is attested once, and a counter is accepted once (compare-and-set).
public protocol AttestationStore: Sendable {
    /// Stores a challenge, by its SHA-256 (hex), usable once until `expiresAt`.
    func issueAttestationChallenge(hash: String, expiresAt: Date) async throws

    /// Removes the challenge `hash` and says whether it was there and not expired at `now`: true once, at most.
    func consumeAttestationChallenge(hash: String, now: Date) async throws -> Bool

    /// Stores an attested key for `key.userId`; false (nothing stored) when the key id was attested before.
    func saveAttestedKey(_ key: AttestedKeyRecord) async throws -> Bool

    /// The attested key `keyId` (standard base64), with the account it acts for now (its user, or the account a
    /// guest was merged into).
    func attestedKey(keyId: String) async throws -> AttestedKeyRecord?

    /// Whether `userId` (or a guest merged into it) has an attested key.
    func hasAttestedKey(userId: String) async throws -> Bool

    /// Raises the key's counter to `counter` when it is below it, in one statement: true when raised. Two processes
    /// accepting the same assertion cannot both see true.
    func advanceAssertionCounter(keyId: String, to counter: UInt32) async throws -> Bool

    /// Counts an unattested spend of free value by `userId` (`monitor` mode's flag), with the rule that failed.
    func recordUnattestedSpend(userId: String, reason: String, now: Date) async throws

    /// The user's flag: how many unattested spends, the last reason and when; nil when none.
    func unattestedSpends(userId: String) async throws -> UnattestedSpends?

    /// Deletes challenges that expired before `now`; returns how many.
    func purgeAttestationChallenges(now: Date) async throws -> Int
}

/// An installation's attested App Attest key.
public struct AttestedKeyRecord: Sendable, Hashable {
    /// The key id, standard base64 of its 32 bytes.
    public var keyId: String
    /// The user the key was attested for (a guest, or an account).
    public var userId: String
    /// The account the key acts for now: ``userId``, or the account the guest was merged into (read only).
    public var accountId: String
    /// The installation (SHA-256 hex of its device secret) the key was attested with, if at a guest sign-in.
    public var installation: String?
    /// The public key, x9.63 (65 bytes).
    public var publicKey: [UInt8]
    /// The counter of the last accepted assertion (0 after the attestation).
    public var counter: UInt32
    /// `production` or `development`.
    public var environment: String
    /// Apple's receipt (for the fraud metric).
    public var receipt: [UInt8]
    /// When the key was attested.
    public var attestedAt: Date

    /// Creates a record; ``accountId`` is `userId` until a store reads otherwise.
    public init(
        keyId: String, userId: String, installation: String?, publicKey: [UInt8], counter: UInt32 = 0, environment: String,
        receipt: [UInt8], attestedAt: Date
    ) {
        self.keyId = keyId
        self.userId = userId
        self.accountId = userId
        self.installation = installation
        self.publicKey = publicKey
        self.counter = counter
        self.environment = environment
        self.receipt = receipt
        self.attestedAt = attestedAt
    }
}

/// `monitor` mode's flag on a user: unattested spends of free value.
public struct UnattestedSpends: Sendable, Hashable {
    /// How many.
    public var count: Int64
    /// The last one's reason (`missing`, or an ``AppAttestError`` code).
    public var lastReason: String
    /// The last one's time.
    public var lastAt: Date

    /// Creates a flag.
    public init(count: Int64, lastReason: String, lastAt: Date) {
        self.count = count
        self.lastReason = lastReason
        self.lastAt = lastAt
    }
}
