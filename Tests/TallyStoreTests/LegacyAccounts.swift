import Foundation
import TallyStore
import Testing

/// Accounts as a database from before installations stored them (device credentials, no `installations`):
/// a guest with today's count on its device, and an account linked from a guest on another device. The
/// migration tests write them with each store's SQL, migrate, and check them with ``expectMigrated(_:_:)``.
struct LegacyAccounts: Sendable {
    let guest = randomId()
    let guestDevice = randomId("dev-")
    let linked = randomId()
    let linkedDevice = randomId("dev-")
    let email = "\(randomId())@example.com"
    let session = randomId("ses-")
    let refresh = randomId("rt-")
    let now = defaultStart
    /// The end of the UTC day of `now`, where both accounts' counters end.
    let windowEnd = Date(timeIntervalSince1970: 1_800_000_000 + 16 * 3600)

    /// After the migration: the guest keeps its account, session, tokens and grant, its device is its
    /// installation with today's count, and the linked account's device opens a new guest, not the account.
    func expectMigrated(_ store: any TallyStorage, _ kind: StoreKind) async throws {
        #expect(
            try await store.user(id: guest)
                == UserRecord(id: guest, email: nil, timezone: "UTC", language: nil, premiumUntil: nil, createdAt: now), "[\(kind)]")
        #expect(try await store.wallet(userId: guest, now: now) == WalletState(balance: 25, held: 0, version: 1), "[\(kind)]")
        #expect(try await store.liveSessionUser(sessionId: session) == guest, "[\(kind)]")
        #expect(try await store.refreshTokenSession(hash: refresh) == session, "[\(kind)]")
        guard case .admit = try await store.beginSignIn(account: randomId(), address: randomId(), policy: SignInPolicy(), now: now) else {
            Issue.record("[\(kind)] the sign-in failures table refuses a first attempt")
            return
        }

        let readings = ["readings": QuotaCounter(used: 2, windowEnd: windowEnd)]
        let state = try await store.accountState(userId: guest, now: now)
        #expect(state?.counters == readings && state?.installation == InstallationCounters(id: guestDevice, counters: readings), "[\(kind)]")
        let again = try await signIn(store, device: guestDevice)
        #expect(!again.created && again.user.id == guest, "[\(kind)]")
        let use = try await store.execute(
            .performAction(userId: guest, action: ActionSpec(name: "horoscope", quota: "readings"), quotaLimit: 3), idempotency: nil,
            now: now
        ) { outcome in
            #expect(outcome.state.installation?.counters["readings"]?.used == 3 && outcome.state.counters["readings"]?.used == 3, "[\(kind)]")
            return StoredResponse(status: 200, body: [])
        }
        #expect(use.response.status == 200, "[\(kind)]")

        // The linked account is reached by its password only; its device is an installation with a new guest.
        let fresh = try await signIn(store, device: linkedDevice)
        #expect(fresh.created && fresh.user.id != linked && fresh.user.isGuest, "[\(kind)] the device secret opened a linked account")
        #expect(
            try await store.accountState(userId: fresh.user.id, now: now)?.installation
                == InstallationCounters(id: linkedDevice, counters: [:]), "[\(kind)]")
        #expect(try await store.passwordHash(email: email)?.userId == linked, "[\(kind)]")
        let linkedState = try await store.accountState(userId: linked, now: now)
        #expect(linkedState?.installation == nil && linkedState?.counters["readings"]?.used == 3, "[\(kind)]")
    }

    private func signIn(_ store: any TallyStorage, device: String) async throws -> SessionGrant {
        try await store.signInGuest(
            deviceHash: device, ipHash: randomId("ip-"), signupsPerHour: 10, signupGrant: 0, sessionId: randomId("ses-"),
            refresh: NewRefreshToken(hash: randomId("rt-"), expiresAt: now.addingTimeInterval(3600)), sessionsPerUser: 50, now: now)
    }
}
