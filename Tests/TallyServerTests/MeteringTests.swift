import Foundation
import TallyAPI
import TallyStore
import Testing

@Suite("Quotas, actions and holds", .timeLimit(.minutes(10)))
struct MeteringTests {
    static let catalog = try! Catalog(
        signupGrant: 0, quotas: [QuotaSpec(name: "readings", daily: 3)],
        actions: [
            ActionSpec(name: "reading", quota: "readings", tokens: 5), ActionSpec(name: "free.reading", quota: "readings"),
            ActionSpec(name: "ai.query", tokens: 3),
        ])

    func act(_ api: APIConnection, _ user: TestUser, _ action: String) async throws -> APIResponse {
        try await api.send(.post, "/v1/actions/\(action)", token: user.accessToken, headers: [.idempotencyKey: UUID().uuidString])
    }

    @Test("Three free uses, then tokens, then 402 with the authoritative state; reset at local midnight", arguments: StoreKind.allCases)
    func quotaThenTokens(kind: StoreKind) async throws {
        try await LiveServer.with(kind, catalog: Self.catalog) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            // 2027-01-15T08:00Z is 17:00 in Tokyo: local midnight is 15:00Z.
            let patched = try await api.send(.patch, "/v1/me", token: user.accessToken, json: UpdateMeRequest(timezone: "Asia/Tokyo"))
            #expect(patched.status == .ok)
            try await api.grant(7, to: user)
            for _ in 0..<3 {
                let result = try await act(api, user, "reading").decode(ActionResult.self)
                #expect(result.paidWith == .quota && result.wallet.balance == 7)
            }
            let paid = try await act(api, user, "reading").decode(ActionResult.self)
            #expect(paid.paidWith == .tokens && paid.tokensCharged == 5 && paid.wallet.balance == 2)
            #expect(paid.quotas.first?.remaining == 0)
            #expect(paid.quotas.first?.resetsAt == Date(timeIntervalSince1970: 1_800_000_000 + 7 * 3600))
            let refused = try await act(api, user, "reading")
            #expect(refused.status == .paymentRequired && refused.errorCode == "insufficient_tokens")
            let body = try refused.decode(ErrorResponse.self)
            #expect(body.wallet?.balance == 2 && body.quotas?.first?.used == 3)
            let quotaOnly = try await act(api, user, "free.reading")
            #expect(quotaOnly.status == .paymentRequired && quotaOnly.errorCode == "quota_exhausted")

            server.clock.advance(by: 7 * 3600 - 1)  // 14:59:59Z, one second before Tokyo midnight
            #expect(try await act(api, user, "free.reading").status == .paymentRequired)
            server.clock.advance(by: 1)
            let quotas = try await api.send(.get, "/v1/quotas", token: user.accessToken).decode(QuotaList.self)
            #expect(quotas.items.first?.remaining == 3)
            #expect(try await act(api, user, "free.reading").decode(ActionResult.self).paidWith == .quota)
            try await api.expectBooksBalance(user)
            await api.close()
        }
    }

    @Test("Changing time zone does not restart today's quota", arguments: StoreKind.allCases)
    func timezoneHopping(kind: StoreKind) async throws {
        try await LiveServer.with(kind, catalog: Self.catalog) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            for _ in 0..<3 { #expect(try await act(api, user, "free.reading").status == .ok) }
            // 08:00Z: in Pacific/Kiritimati (UTC+14) it is already 22:00 — midnight is two hours away, not sixteen.
            let patched = try await api.send(.patch, "/v1/me", token: user.accessToken, json: UpdateMeRequest(timezone: "Pacific/Kiritimati"))
            #expect(patched.status == .ok, "\(patched.text)")
            #expect(try patched.decode(Me.self).timezone == "Pacific/Kiritimati")
            server.clock.advance(by: 2 * 3600 + 60)
            let refused = try await act(api, user, "free.reading")
            #expect(refused.status == .paymentRequired)
            // Still the window opened in UTC: it ends at UTC midnight, 2027-01-16T00:00Z.
            #expect(try refused.decode(ErrorResponse.self).quotas?.first?.resetsAt == Date(timeIntervalSince1970: 1_800_000_000 + 16 * 3600))
            server.clock.advance(by: 14 * 3600)  // past the original UTC midnight
            let next = try await act(api, user, "free.reading")
            #expect(next.status == .ok)
            // The next window starts at 14:00 in Kiritimati, not a local midnight, so it runs to the first
            // Kiritimati midnight at least 24 hours later: 2027-01-17T10:00Z (on UTC it would end at 00:00Z).
            #expect(try next.decode(ActionResult.self).quotas.first?.resetsAt == Date(timeIntervalSince1970: 1_800_000_000 + 2 * 86_400 + 2 * 3600))
            await api.close()
        }
    }

    @Test("Premium makes quota actions free and uncounted; token actions still cost", arguments: StoreKind.allCases)
    func premium(kind: StoreKind) async throws {
        try await LiveServer.with(kind, catalog: Self.catalog) { server in
            let api = server.connection()
            let user = try await api.newGuest(granted: 3)
            let until = Date(timeIntervalSince1970: 1_800_000_000 + 86_400)
            let set = try await api.send(.put, "/admin/v1/users/\(user.userId)/premium", admin: true, json: PremiumRequest(until: until))
            #expect(set.status == .ok)
            #expect(try set.decode(Me.self).premiumUntil == until)
            for _ in 0..<5 {
                let result = try await act(api, user, "free.reading").decode(ActionResult.self)
                #expect(result.paidWith == .premium && result.quotas.first?.unlimited == true && result.quotas.first?.used == 0)
            }
            #expect(try await act(api, user, "ai.query").decode(ActionResult.self).wallet.balance == 0)
            server.clock.advance(by: 86_400)
            #expect(try await act(api, user, "free.reading").decode(ActionResult.self).paidWith == .quota)
            await api.close()
        }
    }

    @Test("Holds: capture for less releases the rest; expiry releases by itself", arguments: StoreKind.allCases)
    func holds(kind: StoreKind) async throws {
        try await LiveServer.with(kind, catalog: Self.catalog) { server in
            let api = server.connection()
            let user = try await api.newGuest(granted: 100)
            let created = try await api.send(.post, "/v1/wallet/holds", token: user.accessToken, json: CreateHoldRequest(amount: 60, ttlSeconds: 30))
            #expect(created.status == .created)
            let hold = try created.decode(Hold.self)
            #expect(hold.wallet.available == 40 && hold.wallet.balance == 100)
            let tooMuch = try await api.send(.post, "/v1/wallet/holds", token: user.accessToken, json: CreateHoldRequest(amount: 41, ttlSeconds: 30))
            #expect(tooMuch.status == .paymentRequired && tooMuch.errorCode == "insufficient_tokens")
            let captured = try await api.send(.post, "/v1/wallet/holds/\(hold.holdId)/capture", token: user.accessToken, json: CaptureHoldRequest(amount: 25))
            let settled = try captured.decode(Hold.self)
            #expect(settled.status == "captured" && settled.capturedAmount == 25 && settled.wallet.balance == 75 && settled.wallet.held == 0)
            let twice = try await api.send(.post, "/v1/wallet/holds/\(hold.holdId)/capture", token: user.accessToken, json: CaptureHoldRequest(amount: 1))
            #expect(twice.status == .conflict && twice.errorCode == "hold_not_open")

            let expiring = try await api.send(.post, "/v1/wallet/holds", token: user.accessToken, json: CreateHoldRequest(amount: 50, ttlSeconds: 30)).decode(Hold.self)
            #expect(try await api.wallet(user).available == 25)
            server.clock.advance(by: 30)
            let wallet = try await api.wallet(user)
            #expect(wallet.held == 0 && wallet.available == 75)
            let late = try await api.send(.post, "/v1/wallet/holds/\(expiring.holdId)/capture", token: user.accessToken, json: CaptureHoldRequest(amount: 10))
            #expect(late.status == .conflict)
            let shown = try await api.send(.get, "/v1/wallet/holds/\(expiring.holdId)", token: user.accessToken).decode(Hold.self)
            #expect(shown.status == "expired")
            let kinds = try await api.allEntries(user).map(\.kind)
            #expect(kinds == ["expire", "hold", "capture", "hold", "grant"])
            try await api.expectBooksBalance(user)
            await api.close()
        }
    }

    @Test("Wallet ETag revalidation and entry pagination", arguments: StoreKind.allCases)
    func etagAndPages(kind: StoreKind) async throws {
        try await LiveServer.with(kind, catalog: Self.catalog) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            for _ in 0..<5 { try await api.grant(1, to: user) }
            let first = try await api.send(.get, "/v1/wallet", token: user.accessToken)
            let etag = try #require(first.headers[.eTag])
            let notModified = try await api.send(.get, "/v1/wallet", token: user.accessToken, headers: [.ifNoneMatch: etag])
            #expect(notModified.status == .notModified && notModified.body.isEmpty)
            try await api.grant(1, to: user)
            #expect(try await api.send(.get, "/v1/wallet", token: user.accessToken, headers: [.ifNoneMatch: etag]).status == .ok)
            let page1 = try await api.send(.get, "/v1/wallet/entries?limit=4", token: user.accessToken).decode(Page<LedgerEntry>.self)
            #expect(page1.items.count == 4)
            let cursor = try #require(page1.nextCursor)
            let page2 = try await api.send(.get, "/v1/wallet/entries?limit=4&cursor=\(cursor)", token: user.accessToken).decode(Page<LedgerEntry>.self)
            #expect(page2.items.count == 2 && page2.nextCursor == nil)
            #expect(page1.items.map(\.id) + page2.items.map(\.id) == (page1.items + page2.items).map(\.id).sorted(by: >))
            await api.close()
        }
    }

    @Test("Idempotency: replay, mismatch, refusals leave nothing behind", arguments: StoreKind.allCases)
    func idempotency(kind: StoreKind) async throws {
        try await LiveServer.with(kind, catalog: Self.catalog) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let refused = try await api.send(.post, "/v1/actions/ai.query", token: user.accessToken, headers: [.idempotencyKey: "k1"])
            #expect(refused.status == .paymentRequired)
            try await api.grant(10, to: user)
            let paid = try await api.send(.post, "/v1/actions/ai.query", token: user.accessToken, headers: [.idempotencyKey: "k1"])
            #expect(paid.status == .ok)
            let other = try await api.send(.post, "/v1/actions/reading", token: user.accessToken, headers: [.idempotencyKey: "k1"])
            #expect(other.status == .unprocessableContent && other.errorCode == "idempotency_mismatch")
            let grantKey: HTTPFields = [.idempotencyKey: "grant-1"]
            let g1 = try await api.send(.post, "/admin/v1/users/\(user.userId)/grants", admin: true, json: GrantRequest(amount: 5, reason: "p"), headers: grantKey)
            let g2 = try await api.send(.post, "/admin/v1/users/\(user.userId)/grants", admin: true, json: GrantRequest(amount: 5, reason: "p"), headers: grantKey)
            #expect(g1.status == .created && g2.status == .created && g1.body == g2.body)
            let g3 = try await api.send(.post, "/admin/v1/users/\(user.userId)/grants", admin: true, json: GrantRequest(amount: 6, reason: "p"), headers: grantKey)
            #expect(g3.status == .unprocessableContent)
            #expect(try await api.wallet(user).balance == 12)
            let noKey = try await api.send(.post, "/v1/actions/ai.query", token: user.accessToken)
            #expect(noKey.status == .badRequest && noKey.errorCode == "idempotency_key_required")
            await api.close()
        }
    }
}

import HTTPTypes
