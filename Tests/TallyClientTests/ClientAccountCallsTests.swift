import Foundation
@testable import TallyClient
import TallyTestKit
import Testing

/// The calls apps used to hand-write — holds, ledger pages, profile, premium — against the real server.
@Suite("Client holds, ledger, profile and premium", .timeLimit(.minutes(1)))
struct ClientAccountCallsTests {
    @Test("A hold shows its tokens held at once, and capture charges what the work cost and returns the rest")
    func holdThenCapture() async throws {
        try await TallyTestServer.with { server in
            let clock = ManualClock()
            let (client, transport) = server.client(clock: clock)
            let user = try await client.signInAsGuest()
            try await server.grant(100, to: user.userId)
            _ = try await client.fetch(client.walletQuery, forceRefresh: true)

            // The answer is held back: the optimistic state is what the user sees meanwhile.
            transport.enqueue([.latency(1)], forPathPrefix: "/v1/wallet/holds")
            let creating = Task { try await client.createHold(30, ttl: 60) }
            try await clock.waitForSleepers(1)
            let optimistic = client.state(client.walletQuery)
            #expect(optimistic.value?.held == 30 && optimistic.value?.available == 70 && optimistic.pendingMutations == 1)
            clock.advance(by: 1)
            let hold = try await creating.value
            #expect(hold.status == "open" && hold.amount == 30)
            #expect(client.value(client.walletQuery) == hold.wallet)

            let captured = try await client.capture(hold, amount: 12)
            #expect(captured.status == "captured" && captured.capturedAmount == 12)
            let wallet = try #require(client.value(client.walletQuery))
            #expect((wallet.balance, wallet.held, wallet.available) == (88, 0, 88))
            // The server agrees, and capturing again with the same amount replays the first answer.
            #expect(try await client.fetch(client.walletQuery, forceRefresh: true).balance == 88)
            #expect(try await client.capture(hold, amount: 12) == captured)
            #expect(try await client.fetch(client.walletQuery, forceRefresh: true).balance == 88)
        }
    }

    @Test("Release returns every held token; a hold larger than the balance is refused and rolled back")
    func releaseAndRefusal() async throws {
        try await TallyTestServer.with { server in
            let (client, _) = server.client()
            let user = try await client.signInAsGuest()
            try await server.grant(50, to: user.userId)
            _ = try await client.fetch(client.walletQuery, forceRefresh: true)
            let hold = try await client.createHold(20)
            let released = try await client.release(hold)
            #expect(released.status == "released")
            #expect(client.value(client.walletQuery).map { ($0.held, $0.available) } ?? (-1, -1) == (0, 50))

            await #expect {
                try await client.createHold(51)
            } throws: { error in
                guard let error = error as? ClientError, error.code == .insufficientTokens else { return false }
                return error.wallet?.available == 50
            }
            #expect(client.value(client.walletQuery)?.available == 50)
            #expect(client.state(client.walletQuery).pendingMutations == 0)
        }
    }

    @Test("Ledger pages walk the whole history newest first, and stop fetching when the loop stops")
    func ledgerPages() async throws {
        try await TallyTestServer.with { server in
            let (client, transport) = server.client()
            let user = try await client.signInAsGuest()
            for amount in 1...7 { try await server.grant(Int64(amount), to: user.userId) }
            var pages: [[LedgerEntry]] = []
            for try await page in client.ledgerPages(pageSize: 3) { pages.append(page) }
            #expect(pages.map(\.count) == [3, 3, 1])
            let entries = pages.flatMap { $0 }
            #expect(entries.map(\.amount) == [7, 6, 5, 4, 3, 2, 1])
            #expect(entries.first?.balanceAfter == 28)
            #expect(Set(entries.map(\.id)).count == 7)

            let before = transport.count(path: "/v1/wallet/entries")
            for try await _ in client.ledgerPages(pageSize: 2) { break }
            #expect(transport.count(path: "/v1/wallet/entries") == before + 1)
        }
    }

    @Test("updateProfile changes the zone the quotas reset in; premiumStatus follows the server")
    func profileAndPremium() async throws {
        try await TallyTestServer.with { server in
            let (client, _) = server.client()
            let user = try await client.signInAsGuest()
            let me = try await client.updateProfile(timezone: "Asia/Tokyo", language: "ja")
            #expect(me.timezone == "Asia/Tokyo" && me.language == "ja")
            #expect(client.value(client.meQuery)?.timezone == "Asia/Tokyo")
            // Tokyo's midnight is 15:00 UTC: the quotas now reset then.
            let quotas = try await client.fetch(client.quotasQuery)
            try #require(!quotas.items.isEmpty)
            let tokyo = try #require(TimeZone(identifier: "Asia/Tokyo"))
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = tokyo
            for quota in quotas.items {
                #expect(calendar.component(.hour, from: quota.resetsAt) == 0, "\(quota.name) resets at \(quota.resetsAt)")
            }

            #expect(try await client.premiumStatus() == PremiumStatus(isActive: false, until: nil))
            let until = server.serverClock.now.addingTimeInterval(30 * 86_400)
            try await server.setPremium(until: until, for: user.userId)
            let premium = try await client.premiumStatus(forceRefresh: true)
            #expect(premium.isActive)
            #expect(abs((premium.until ?? .distantPast).timeIntervalSince(until)) < 1)
        }
    }

    @Test("Sign-in sets the device's time zone on the user, once: the quotas then reset at the device's midnight")
    func signInAdoptsTheDeviceZone() async throws {
        try await TallyTestServer.with { server in
            let kolkata = try #require(TimeZone(identifier: "Asia/Kolkata"))
            let (client, transport) = server.client { $0.timeZone = kolkata }
            try await client.signInAsGuest()
            #expect(transport.count(path: "/v1/me") == 1)
            let me = try await client.fetch(client.meQuery)
            #expect(me.timezone == "Asia/Kolkata")
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = kolkata
            let quotas = try await client.fetch(client.quotasQuery)
            try #require(!quotas.items.isEmpty)
            for quota in quotas.items { #expect(calendar.component(.hour, from: quota.resetsAt) == 0) }
            // Signing in again with the zone already set sends no second PATCH.
            try await client.signInAsGuest()
            #expect(transport.requests.filter { $0.method == "PATCH" }.count == 1)
        }
    }
}
