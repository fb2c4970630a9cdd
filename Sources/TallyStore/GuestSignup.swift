import Foundation

/// The rules of a guest sign-up, written once for both stores: how many new guests one address may create
/// (``IdentityStore/signInGuest(deviceHash:ipHash:signupsPerHour:signupGrant:sessionId:refresh:sessionsPerUser:now:)``),
/// and the account a new guest starts with. Each store counts the address's sign-ups and writes the
/// account in its own transaction.
public enum GuestSignup {
    /// How long a sign-up counts against its address.
    public static let window: TimeInterval = 3600

    /// The sign-ups created after this instant count against one at `now`.
    public static func windowStart(now: Date) -> Date { now.addingTimeInterval(-window) }

    /// Admits a sign-up from an address that created `count` guests in the window, the oldest at `oldest`;
    /// at `perHour` or more, refuses it (`.rateLimited`) until the oldest leaves the window, at least a second.
    public static func admit(count: Int, oldest: Date?, perHour: Int, now: Date) throws(StoreError) {
        guard count >= perHour else { return }
        let oldest = oldest?.millis ?? now.millis
        let leaves = oldest + Int64(saturating: window * 1000)
        throw StoreError(.rateLimited, retryAfter: max(1, Double(leaves - now.millis) / 1000))
    }

    /// A new guest account created at `now`, as the store keeps it: a random id, UTC, no language, no
    /// premium, created in a whole millisecond.
    public static func newGuest(now: Date) -> UserRecord {
        UserRecord(id: UUID().uuidString.lowercased(), email: nil, timezone: "UTC", language: nil, premiumUntil: nil, createdAt: now)
            .stored
    }

    /// The ledger entry that grants a new guest `amount` tokens, if any.
    public static func grant(_ amount: Int64) -> PlannedEntry? {
        amount > 0 ? PlannedEntry(kind: .grant, amount: amount, heldChange: 0, reason: "signup") : nil
    }
}
