import Foundation
import TallyStore
import Testing

/// ``RefreshTokenPolicy``: what a presented refresh token comes to, for both stores.
@Suite("RefreshTokenPolicy", .timeLimit(.minutes(1)))
struct RefreshTokenPolicyTests {
    private let now = Date(timeIntervalSince1970: 1_800_000_000)

    private func token(expiresIn seconds: TimeInterval = 3600, used: Bool = false, revoked: Bool = false) -> PresentedRefreshToken {
        PresentedRefreshToken(
            sessionId: "s", expiresAt: now.addingTimeInterval(seconds), usedAt: used ? now.addingTimeInterval(-60) : nil,
            sessionRevokedAt: revoked ? now.addingTimeInterval(-30) : nil)
    }

    @Test("Unknown refuses; valid rotates; used is reuse (even expired); expired unused refuses; a revoked session refuses first")
    func decisions() {
        #expect(RefreshTokenPolicy.decide(nil, now: now) == .refuse)
        #expect(RefreshTokenPolicy.decide(token(), now: now) == .rotate)
        #expect(RefreshTokenPolicy.decide(token(used: true), now: now) == .revokeSession)
        #expect(RefreshTokenPolicy.decide(token(expiresIn: -10, used: true), now: now) == .revokeSession)
        #expect(RefreshTokenPolicy.decide(token(expiresIn: -10), now: now) == .refuse)
        #expect(RefreshTokenPolicy.decide(token(revoked: true), now: now) == .refuse)
        #expect(RefreshTokenPolicy.decide(token(used: true, revoked: true), now: now) == .refuse)
    }

    @Test("Expiry is exact to the millisecond, with no grace: the instant of expiresAt is expired, a millisecond before is not")
    func expiryInstant() {
        #expect(RefreshTokenPolicy.decide(token(expiresIn: 0), now: now) == .refuse)
        #expect(RefreshTokenPolicy.decide(token(expiresIn: 0.001), now: now) == .rotate)
        // Reuse right after the rotation is still reuse: no grace window.
        let justUsed = PresentedRefreshToken(sessionId: "s", expiresAt: now.addingTimeInterval(60), usedAt: now, sessionRevokedAt: nil)
        #expect(RefreshTokenPolicy.decide(justUsed, now: now) == .revokeSession)
    }

    @Test("A claiming store: the claim rotates; a rotatable token the claim missed was taken concurrently, which is reuse")
    func claims() {
        #expect(RefreshTokenPolicy.decide(token(), now: now, claimed: true) == .rotate)
        #expect(RefreshTokenPolicy.decide(token(), now: now, claimed: false) == .revokeSession)
        #expect(RefreshTokenPolicy.decide(token(used: true), now: now, claimed: false) == .revokeSession)
        #expect(RefreshTokenPolicy.decide(token(expiresIn: -1), now: now, claimed: false) == .refuse)
        #expect(RefreshTokenPolicy.decide(token(revoked: true), now: now, claimed: false) == .refuse)
        #expect(RefreshTokenPolicy.decide(nil, now: now, claimed: false) == .refuse)
    }

    @Test("The errors the stores answer with")
    func errors() {
        #expect(RefreshDecision.rotate.error == nil)
        #expect(RefreshDecision.revokeSession.error?.code == .refreshTokenReused)
        #expect(RefreshDecision.refuse.error?.code == .invalidRefreshToken)
    }
}
