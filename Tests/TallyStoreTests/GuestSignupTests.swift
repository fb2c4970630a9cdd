import Foundation
import TallyStore
import Testing

/// The sign-up rules both stores apply (``GuestSignup``); the conformance suite checks each store counts
/// the address's sign-ups with them.
@Suite("GuestSignup", .timeLimit(.minutes(1)))
struct GuestSignupTests {
    private let now = Date(millis: 1_800_000_000_123)

    /// Whether a sign-up created at `createdAt` counts against one at `instant` (the stores' `created_at > start`).
    private func counts(_ createdAt: Date, at instant: Date) -> Bool {
        createdAt.millis > GuestSignup.windowStart(now: instant).millis
    }

    @Test func anAddressUnderItsLimitSignsUp() throws {
        try GuestSignup.admit(count: 0, oldest: nil, perHour: 1, now: now)
        try GuestSignup.admit(count: 4, oldest: now.addingTimeInterval(-10), perHour: 5, now: now)
    }

    /// At the limit the address waits exactly until its oldest sign-up stops counting, and at least a second.
    @Test(arguments: [1, 599.5, 3_000, 3_599, 3_599.999, 3_600])
    func refusedUntilTheOldestLeavesTheWindow(age: TimeInterval) throws {
        let oldest = Date(millis: now.addingTimeInterval(-age).millis)
        #expect(counts(oldest, at: now) == (age < 3_600))
        let error = #expect(throws: StoreError.self) { try GuestSignup.admit(count: 5, oldest: oldest, perHour: 5, now: now) }
        #expect(error?.code == .rateLimited)
        let retryAfter = try #require(error?.retryAfter)
        #expect(retryAfter >= 1)
        #expect(!counts(oldest, at: now.addingTimeInterval(retryAfter)), "after retryAfter the oldest no longer counts")
        if retryAfter > 1 {
            #expect(counts(oldest, at: now.addingTimeInterval(retryAfter - 0.001)), "and not a millisecond sooner")
        }
    }

    @Test func newGuestIsAGuestAsStored() {
        let instant = Date(timeIntervalSince1970: 1_800_000_000.123_45)
        let guest = GuestSignup.newGuest(now: instant)
        #expect(guest.isGuest && guest.timezone == "UTC" && guest.language == nil && guest.premiumUntil == nil)
        #expect(guest.createdAt == Date(millis: instant.millis) && guest.createdAt != instant)
        #expect(guest.id == guest.id.lowercased() && UUID(uuidString: guest.id) != nil)
        #expect(GuestSignup.newGuest(now: instant).id != guest.id)
    }

    @Test func grantIsOneEntryOrNone() {
        #expect(GuestSignup.grant(0) == nil)
        #expect(GuestSignup.grant(25) == PlannedEntry(kind: .grant, amount: 25, heldChange: 0, reason: "signup"))
    }
}
