import Crypto
import Foundation
import Synchronization

/// Payloads a verifier has accepted, by the SHA-256 of the exact signed bytes, so that the same JWS submitted again is
/// answered without verifying it again: an app re-submits its unfinished transactions at every launch, and a replay then
/// costs a hash and a lookup instead of a chain build and three ECDSA checks.
///
/// Sound because a verification is a function of the bytes and the verifier alone: the chain is checked at the
/// payload's own `signedDate` (never at "now"), revocation is not checked, and the rules (roots, bundle id,
/// environments) are those of the ``AppStoreVerifier`` that owns the cache. Only a payload that passed every rule is
/// stored, and only under the digest of the very bytes that passed: a JWS that differs in one byte (another signature,
/// a tampered payload, another chain) is verified in full, and a refusal is never remembered.
///
/// Bounded: at most `capacity` payloads, in two generations of `capacity / 2`. Entries go into the newer one; when it
/// is full it becomes the older one and the previous older one is dropped whole; a hit in the older one moves the entry
/// to the newer one. So every entry inserted or hit among the last `capacity / 2` insertions is kept, at O(1) a step.
final class VerifiedPayloadCache<Payload: Sendable>: Sendable {
    private struct State {
        var newer: [SHA256Digest: Payload] = [:]
        var older: [SHA256Digest: Payload] = [:]
        var hits = 0
    }

    /// The most payloads kept.
    let capacity: Int
    private let generation: Int
    private let state = Mutex(State())

    /// A cache of at most `capacity` payloads (at least 2).
    init(capacity: Int) {
        self.capacity = max(2, capacity)
        generation = self.capacity / 2
    }

    /// The key of `signed`: the SHA-256 of its UTF-8 bytes, exactly as received.
    static func key(_ signed: String) -> SHA256Digest {
        var signed = signed
        return signed.withUTF8 { SHA256.hash(data: UnsafeRawBufferPointer($0)) }
    }

    /// The payload verified under `key`, if it is still kept.
    func payload(for key: SHA256Digest) -> Payload? {
        state.withLock { state in
            if let payload = state.newer[key] {
                state.hits += 1
                return payload
            }
            guard let payload = state.older.removeValue(forKey: key) else { return nil }
            state.hits += 1
            Self.insert(payload, for: key, into: &state, generation: generation)
            return payload
        }
    }

    /// Keeps `payload`, which has just passed every rule, under `key`.
    func insert(_ payload: Payload, for key: SHA256Digest) {
        state.withLock { Self.insert(payload, for: key, into: &$0, generation: generation) }
    }

    /// How many payloads are kept.
    var count: Int { state.withLock { $0.newer.count + $0.older.count } }

    /// How many lookups found their payload.
    var hits: Int { state.withLock { $0.hits } }

    private static func insert(_ payload: Payload, for key: SHA256Digest, into state: inout State, generation: Int) {
        if state.newer[key] == nil, state.newer.count >= generation {
            state.older = state.newer
            state.newer = [:]
            state.newer.reserveCapacity(generation)
        }
        state.older.removeValue(forKey: key)
        state.newer[key] = payload
    }
}
