import Foundation
import TallyStore
import Testing

/// Sign in with Apple identities, on every store: the `sub` is the identity (an email only a contact), a guest becomes
/// the Apple account in place, a new `sub` makes a new account (once, however many sign in at once), Apple's
/// notifications mark consent revoked or delete (each once, never about an earlier link), identity tokens are taken
/// once, a reset of an unverified email removes the identity, and the refresh token is kept to revoke at deletion.
@Suite("Apple identity conformance", .timeLimit(.minutes(10)))
struct AppleIdentityConformanceTests {
    static func subject() -> String { randomId("001234.") }

    @Test("A guest links an Apple identity in place: same id, no longer a guest, detached from its installation",
        arguments: StoreKind.allCases)
    func linkInPlace(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let device = randomId("dev-")
            let guest = try await f.signIn(device: device).user.id
            try await f.run(.grant(userId: guest, amount: 7, reason: "test"))
            let sub = Self.subject()
            let credential = AppleCredential(subject: sub, email: "relay@privaterelay.appleid.com", refreshToken: "enc:r1")
            let linked = try await f.store.linkApple(userId: guest, credential: credential, now: f.now)
            #expect(linked.id == guest && linked.hasAppleIdentity && !linked.isGuest && linked.email == nil, "[\(kind)]")
            #expect(try await f.store.user(id: guest)?.isGuest == false, "[\(kind)]")
            #expect(try await f.store.appleAccount(subject: sub)?.id == guest, "[\(kind)]")
            let identity = try await f.store.appleIdentity(userId: guest)
            #expect(
                identity == AppleIdentityRecord(
                    userId: guest, subject: sub, email: "relay@privaterelay.appleid.com", refreshToken: "enc:r1",
                    linkedAt: Date(millis: f.now.millis)), "[\(kind)]")
            #expect(try await f.balance(guest) == 7, "[\(kind)] the account keeps what the guest had")
            // The device secret no longer opens it: a new guest.
            let next = try await f.signIn(device: device)
            #expect(next.created && next.user.id != guest, "[\(kind)]")
            // Linking the same identity again only updates the contact; another identity is refused.
            f.clock.advance(by: 60)
            _ = try await f.store.linkApple(userId: guest, credential: AppleCredential(subject: sub, email: "new@example.com"), now: f.now)
            #expect(try await f.store.appleIdentity(userId: guest)?.email == "new@example.com", "[\(kind)]")
            #expect(try await f.store.appleIdentity(userId: guest)?.refreshToken == "enc:r1", "[\(kind)]")
            await expectStoreError(.alreadyLinked, kind) {
                try await f.store.linkApple(userId: guest, credential: AppleCredential(subject: Self.subject()), now: f.now)
            }
            await expectStoreError(.userNotFound, kind) {
                try await f.store.linkApple(userId: randomId(), credential: AppleCredential(subject: Self.subject()), now: f.now)
            }
            try await f.checkInvariants([guest])
        }
    }

    @Test("A sub already linked to another account is refused, and an email account can add an Apple identity",
        arguments: StoreKind.allCases)
    func linkedElsewhere(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let sub = Self.subject()
            let owner = try await f.newUser()
            _ = try await f.store.linkApple(userId: owner, credential: AppleCredential(subject: sub), now: f.now)
            let other = try await f.newUser()
            await expectStoreError(.appleIdentityInUse, kind) {
                try await f.store.linkApple(userId: other, credential: AppleCredential(subject: sub), now: f.now)
            }
            #expect(try await f.store.user(id: other)?.hasAppleIdentity == false, "[\(kind)]")
            let withEmail = try await f.newUser()
            _ = try await f.store.linkCredentials(userId: withEmail, email: randomId() + "@example.com", passwordHash: "hash")
            let both = try await f.store.linkApple(userId: withEmail, credential: AppleCredential(subject: Self.subject()), now: f.now)
            #expect(both.email != nil && both.hasAppleIdentity, "[\(kind)]")
            // An Apple account may add an email and password too.
            let appleOnly = try await f.newUser()
            _ = try await f.store.linkApple(userId: appleOnly, credential: AppleCredential(subject: Self.subject()), now: f.now)
            let added = try await f.store.linkCredentials(userId: appleOnly, email: randomId() + "@example.com", passwordHash: "hash")
            #expect(added.hasAppleIdentity && added.email != nil, "[\(kind)]")
        }
    }

    @Test("A new sub signs up a new account (with the sign-up grant); the same sub again signs in to it, its contact refreshed",
        arguments: StoreKind.allCases)
    func newAccountAndSignIn(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let sub = Self.subject()
            #expect(try await f.store.appleAccount(subject: sub) == nil, "[\(kind)]")
            let first = try await f.signInWithApple(sub, email: "a@privaterelay.appleid.com", refreshToken: "enc:1", signupGrant: 3)
            #expect(first.created && !first.user.isGuest && first.user.hasAppleIdentity && first.user.email == nil, "[\(kind)]")
            let account = first.user.id
            #expect(try await f.store.liveSessionUser(sessionId: first.sessionId) == account, "[\(kind)]")
            #expect(try await f.balance(account) == 3, "[\(kind)]")
            let found = try await f.store.appleAccount(subject: sub)
            #expect(found?.id == account && found?.isGuest == false, "[\(kind)]")

            let again = try await f.signInWithApple(sub, refreshToken: "enc:2", signupGrant: 3)
            #expect(!again.created && again.user.id == account && again.user.hasAppleIdentity, "[\(kind)]")
            let identity = try await f.store.appleIdentity(userId: account)
            #expect(identity?.email == "a@privaterelay.appleid.com" && identity?.refreshToken == "enc:2", "[\(kind)]")
            #expect(try await f.balance(account) == 3, "[\(kind)] one sign-up grant")
            // A session opened for the account the lookup found (the server's known-sub path).
            let opened = try await f.store.openSession(
                userId: account, sessionId: randomId(), refresh: f.refresh(), sessionsPerUser: 5, now: f.now)
            #expect(opened.user.hasAppleIdentity, "[\(kind)]")
            // Linking that sub to a guest is refused: it is the account's.
            let guest = try await f.newUser()
            await expectStoreError(.appleIdentityInUse, kind) {
                try await f.store.linkApple(userId: guest, credential: AppleCredential(subject: sub), now: f.now)
            }
            try await f.checkInvariants([account])
        }
    }

    @Test("Concurrent first sign-ins of one sub make one account", arguments: StoreKind.allCases)
    func concurrentSignUps(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let sub = Self.subject()
            let grants = try await withThrowingTaskGroup(of: SessionGrant.self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        try await f.signInWithApple(sub, signupGrant: 1, sessionsPerUser: 50)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(grants.map(\.user.id)).count == 1 && grants.filter(\.created).count == 1, "[\(kind)]")
            #expect(try await f.balance(grants[0].user.id) == 1, "[\(kind)]")
        }
    }

    @Test("A sign-in to a known identity stores its contact and refresh token where it has them; no account has an unknown sub",
        arguments: StoreKind.allCases)
    func signedIn(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let (user, sub) = (try await f.newUser(), Self.subject())
            #expect(try await f.store.appleSignedIn(AppleCredential(subject: sub, refreshToken: "enc:x"), now: f.now) == false, "[\(kind)]")
            _ = try await f.store.linkApple(userId: user, credential: AppleCredential(subject: sub, email: "a@example.com"), now: f.now)
            #expect(try await f.store.appleIdentity(userId: user)?.refreshToken == nil, "[\(kind)]")
            #expect(try await f.store.appleSignedIn(AppleCredential(subject: sub, refreshToken: "enc:x"), now: f.now), "[\(kind)]")
            #expect(try await f.store.appleSignedIn(AppleCredential(subject: sub), now: f.now), "[\(kind)]")
            let identity = try await f.store.appleIdentity(userId: user)
            #expect(identity?.refreshToken == "enc:x" && identity?.email == "a@example.com" && identity?.consentRevokedAt == nil, "[\(kind)]")
            #expect(identity?.linkedAt == Date(millis: f.now.millis), "[\(kind)] a sign-in with consent standing is no new link")
            #expect(try await f.store.appleIdentity(userId: randomId()) == nil, "[\(kind)]")
        }
    }

    @Test("consent-revoked keeps the identity, marked revoked, and revokes the account's sessions; the next sign-in gives consent again",
        arguments: StoreKind.allCases)
    func consentRevoked(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let sub = Self.subject()
            let first = try await f.signInWithApple(sub, refreshToken: "enc:1")
            let second = try await f.signInWithApple(sub)
            let account = first.user.id
            f.clock.advance(by: 60)
            let revoked = try await f.store.revokeAppleConsent(Self.notice(f, sub), now: f.now)
            #expect(
                revoked == AppleConsentRevocation(userId: account, revokedSessions: [first.sessionId, second.sessionId].sorted()), "[\(kind)]")
            for session in [first.sessionId, second.sessionId] {
                #expect(try await f.store.liveSessionUser(sessionId: session) == nil, "[\(kind)]")
            }
            #expect(try await f.store.appleAccount(subject: sub)?.id == account, "[\(kind)] still the account's")
            let marked = try await f.store.appleIdentity(userId: account)
            #expect(marked?.consentRevokedAt == Date(millis: f.now.millis) && marked?.refreshToken == nil, "[\(kind)] \(String(describing: marked))")
            #expect(try await f.store.user(id: account)?.hasAppleIdentity == true, "[\(kind)]")
            // Revoked already: another notice does nothing.
            #expect(try await f.store.revokeAppleConsent(Self.notice(f, sub), now: f.now) == nil, "[\(kind)]")

            // Signed in again: the mark cleared, the link moved to now, so a notice about before it does nothing.
            f.clock.advance(by: 60)
            let back = try await f.signInWithApple(sub, refreshToken: "enc:2")
            #expect(back.user.id == account && !back.created, "[\(kind)]")
            let restored = try await f.store.appleIdentity(userId: account)
            #expect(restored?.consentRevokedAt == nil && restored?.linkedAt == Date(millis: f.now.millis), "[\(kind)]")
            #expect(restored?.refreshToken == "enc:2", "[\(kind)]")
            let stale = Self.notice(f, sub, eventTime: f.now.addingTimeInterval(-1))
            #expect(try await f.store.revokeAppleConsent(stale, now: f.now) == nil, "[\(kind)]")
            #expect(try await f.store.liveSessionUser(sessionId: back.sessionId) == account, "[\(kind)]")
            // The server's known-sub path gives consent again too.
            #expect(try await f.store.revokeAppleConsent(Self.notice(f, sub), now: f.now)?.userId == account, "[\(kind)]")
            f.clock.advance(by: 60)
            #expect(try await f.store.appleSignedIn(AppleCredential(subject: sub), now: f.now), "[\(kind)]")
            #expect(try await f.store.appleIdentity(userId: account)?.linkedAt == Date(millis: f.now.millis), "[\(kind)]")
            #expect(try await f.store.revokeAppleConsent(Self.notice(f, Self.subject()), now: f.now) == nil, "[\(kind)] no account has it")
        }
    }

    @Test("account-delete deletes an account with no other way in, and only unlinks one with an email and password",
        arguments: StoreKind.allCases)
    func accountDelete(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let sub = Self.subject()
            let grant = try await f.signInWithApple(sub, signupGrant: 4)
            try await f.put(grant.user.id, Collections.notes, "n", #"{"x":1}"#)
            #expect(try await f.store.appleAccountDeleted(Self.notice(f, sub), now: f.now) == .deleted(userId: grant.user.id), "[\(kind)]")
            #expect(try await f.store.user(id: grant.user.id) == nil, "[\(kind)]")
            #expect(try await f.store.liveSessionUser(sessionId: grant.sessionId) == nil, "[\(kind)]")
            #expect(try await f.store.appleAccountDeleted(Self.notice(f, sub), now: f.now) == nil, "[\(kind)]")

            let withEmail = try await f.newUser()
            _ = try await f.store.linkCredentials(userId: withEmail, email: randomId() + "@example.com", passwordHash: "hash")
            let other = Self.subject()
            _ = try await f.store.linkApple(userId: withEmail, credential: AppleCredential(subject: other), now: f.now)
            _ = try await f.store.revokeAppleConsent(Self.notice(f, other), now: f.now)
            #expect(try await f.store.appleAccountDeleted(Self.notice(f, other), now: f.now) == .unlinked(userId: withEmail), "[\(kind)]")
            let kept = try await f.store.user(id: withEmail)
            #expect(kept?.email != nil && kept?.hasAppleIdentity == false, "[\(kind)] revoked or not")
            #expect(try await f.store.appleIdentity(userId: withEmail) == nil, "[\(kind)]")
        }
    }

    @Test("A notice is taken once by its id, and never acts on an identity linked after its event", arguments: StoreKind.allCases)
    func noticesOnceAndInOrder(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let sub = Self.subject()
            let old = try await f.signInWithApple(sub).user.id
            let delete = Self.notice(f, sub)
            #expect(try await f.store.appleAccountDeleted(delete, now: f.now) == .deleted(userId: old), "[\(kind)]")
            f.clock.advance(by: 60)
            let new = try await f.signInWithApple(sub)
            #expect(new.created, "[\(kind)]")
            #expect(try await f.store.appleAccountDeleted(delete, now: f.now) == nil, "[\(kind)] the same id again")
            var late = Self.notice(f, sub, eventTime: delete.eventTime)
            #expect(try await f.store.appleAccountDeleted(late, now: f.now) == nil, "[\(kind)] an event before the link")
            late.id = randomId("jti-")
            #expect(try await f.store.revokeAppleConsent(late, now: f.now) == nil, "[\(kind)] a revocation before the link")
            #expect(try await f.store.liveSessionUser(sessionId: new.sessionId) == new.user.id, "[\(kind)]")
            // At the link's own instant it acts; once.
            let current = Self.notice(f, sub)
            #expect(try await f.store.revokeAppleConsent(current, now: f.now)?.userId == new.user.id, "[\(kind)]")
            _ = try await f.signInWithApple(sub)
            #expect(try await f.store.revokeAppleConsent(current, now: f.now) == nil, "[\(kind)] the same id after a new sign-in")
        }
    }

    @Test("An identity token is taken once; only the guest it merged takes it again; uses and notice ids are purged after their time",
        arguments: StoreKind.allCases)
    func tokenUses(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let (sub, digest) = (Self.subject(), String(repeating: "ab", count: 32))
            let expiry = f.now.addingTimeInterval(600)
            let plain = AppleTokenUse(subject: sub, digest: digest, expiresAt: expiry)
            #expect(try await f.store.useAppleToken(plain, now: f.now), "[\(kind)]")
            #expect(try await f.store.useAppleToken(plain, now: f.now) == false, "[\(kind)]")
            var merging = plain
            merging.mergingGuest = "guest-a"
            #expect(try await f.store.useAppleToken(merging, now: f.now) == false, "[\(kind)] a merge cannot take a token used to sign in")
            let other = AppleTokenUse(subject: sub, digest: String(repeating: "cd", count: 32), expiresAt: expiry, mergingGuest: "guest-a")
            #expect(try await f.store.useAppleToken(other, now: f.now), "[\(kind)]")
            #expect(try await f.store.useAppleToken(other, now: f.now), "[\(kind)] the merge retried by its guest")
            var stranger = other
            stranger.mergingGuest = "guest-b"
            #expect(try await f.store.useAppleToken(stranger, now: f.now) == false, "[\(kind)] another guest")
            stranger.mergingGuest = nil
            #expect(try await f.store.useAppleToken(stranger, now: f.now) == false, "[\(kind)] a sign-in")
            #expect(
                try await f.store.useAppleToken(AppleTokenUse(subject: Self.subject(), digest: digest, expiresAt: expiry), now: f.now),
                "[\(kind)] per sub")
            // Concurrent first uses of one token: one taken.
            let race = AppleTokenUse(subject: sub, digest: String(repeating: "ef", count: 32), expiresAt: expiry)
            let taken = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<8 { group.addTask { try await f.store.useAppleToken(race, now: f.now) } }
                return try await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
            }
            #expect(taken == 1, "[\(kind)]")

            _ = try await f.store.revokeAppleConsent(Self.notice(f, sub, keepFor: 3600), now: f.now)
            #expect(try await f.store.purgeAppleRecords(now: expiry, limit: 100) == 0, "[\(kind)] nothing past its time yet")
            #expect(try await f.store.purgeAppleRecords(now: expiry.addingTimeInterval(1), limit: 100) == 4, "[\(kind)] the uses")
            #expect(try await f.store.useAppleToken(plain, now: f.now), "[\(kind)] forgotten")
            #expect(try await f.store.purgeAppleRecords(now: f.now.addingTimeInterval(3601), limit: 100) == 2, "[\(kind)] the use and the notice")
        }
    }

    @Test("A password reset removes the Apple identity of an account whose email was not verified, and keeps a verified one's",
        arguments: StoreKind.allCases)
    func resetRemovesUnverifiedApple(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            for verified in [false, true] {
                let (user, sub) = (try await f.newUser(), Self.subject())
                _ = try await f.store.linkCredentials(userId: user, email: randomId() + "@example.com", passwordHash: "hash")
                _ = try await f.store.linkApple(userId: user, credential: AppleCredential(subject: sub, refreshToken: "enc:r"), now: f.now)
                if verified {
                    _ = try await Self.issue(f, user, .emailVerification, hash: "h-verify")
                    #expect(
                        try await f.store.verifyEmail(userId: user, codeHash: "h-verify", policy: AccountCodePolicy(), now: f.now) != nil,
                        "[\(kind)]")
                    #expect(try await f.store.appleAccount(subject: sub)?.id == user, "[\(kind)] verifying keeps it")
                }
                _ = try await Self.issue(f, user, .passwordReset, hash: "h-reset")
                let reset = try await f.store.resetPassword(userId: user, codeHash: "h-reset", passwordHash: "new", policy: AccountCodePolicy(), now: f.now)
                #expect(reset?.appleIdentityRemoved == !verified, "[\(kind)] verified: \(verified)")
                #expect((try await f.store.appleAccount(subject: sub)?.id == user) == verified, "[\(kind)] verified: \(verified)")
                #expect(try await f.store.user(id: user)?.emailVerifiedAt != nil, "[\(kind)]")
                // A second reset (the email verified now) keeps what there is.
                _ = try await Self.issue(f, user, .passwordReset, hash: "h-again")
                let again = try await f.store.resetPassword(userId: user, codeHash: "h-again", passwordHash: "x", policy: AccountCodePolicy(), now: f.now)
                #expect(again?.appleIdentityRemoved == false, "[\(kind)]")
            }
            // Without an Apple identity there is nothing to remove.
            let plain = try await f.newUser()
            _ = try await f.store.linkCredentials(userId: plain, email: randomId() + "@example.com", passwordHash: "hash")
            _ = try await Self.issue(f, plain, .passwordReset, hash: "h-plain")
            let reset = try await f.store.resetPassword(userId: plain, codeHash: "h-plain", passwordHash: "new", policy: AccountCodePolicy(), now: f.now)
            #expect(reset?.appleIdentityRemoved == false && reset?.revokedSessions.count == 1, "[\(kind)] \(String(describing: reset))")
        }
    }

    @Test("A guest that signs in with a known sub is merged into its account (the server's account_exists path)",
        arguments: StoreKind.allCases)
    func mergeIntoAppleAccount(kind: StoreKind) async throws {
        try await withFixture(kind) { f in
            let sub = Self.subject()
            let account = try await f.signInWithApple(sub, signupGrant: 2).user.id
            let guest = try await f.newUser(tokens: 5)
            let known = try #require(try await f.store.appleAccount(subject: sub), "[\(kind)]")
            let preview = try await f.store.mergePreview(guestId: guest, into: known.id, now: f.now)
            #expect(preview.summary.tokensMoved == 5 && preview.summary.documentsMoved == 0 && preview.summary.purchasesMoved == 0, "[\(kind)]")
            let merged = try await f.store.merge(guestId: guest, into: account, now: f.now)
            #expect(!merged.replayed && merged.summary == preview.summary, "[\(kind)]")
            #expect(try await f.balance(account) == 7, "[\(kind)]")
            // The merged guest cannot be given an Apple identity.
            await expectStoreError(.userNotFound, kind) {
                try await f.store.linkApple(userId: guest, credential: AppleCredential(subject: Self.subject()), now: f.now)
            }
            try await f.checkInvariants([guest, account])
        }
    }
}

extension AppleIdentityConformanceTests {
    /// A notice about `sub` with a new id, its event at `eventTime` (default: now), kept for `keepFor` seconds.
    static func notice(_ f: Fixture, _ sub: String, eventTime: Date? = nil, keepFor: TimeInterval = 86_400) -> AppleAccountNotice {
        AppleAccountNotice(id: randomId("jti-"), subject: sub, eventTime: eventTime ?? f.now, keepUntil: f.now.addingTimeInterval(keepFor))
    }

    /// Issues an account code for `purpose` with hash `hash`.
    static func issue(_ f: Fixture, _ userId: String, _ purpose: AccountCodePurpose, hash: String) async throws -> String? {
        try await AccountCodeConformanceTests.issue(f, userId, purpose, hash: hash)
    }
}

extension Fixture {
    /// Signs in with Apple without a guest (``AppleIdentityStore/signInWithApple(_:sessionId:refresh:sessionsPerUser:signupGrant:now:)``).
    func signInWithApple(
        _ subject: String, email: String? = nil, refreshToken: String? = nil, signupGrant: Int64 = 0, sessionsPerUser: Int = 5
    ) async throws -> SessionGrant {
        try await store.signInWithApple(
            AppleCredential(subject: subject, email: email, refreshToken: refreshToken), sessionId: randomId(), refresh: refresh(),
            sessionsPerUser: sessionsPerUser, signupGrant: signupGrant, now: now)
    }
}
