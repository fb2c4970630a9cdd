import Foundation
import TallyAPI
import Testing

/// `PATCH /v1/me` takes every IANA zone name Foundation resolves (including the current names that
/// `TimeZone.knownTimeZoneIdentifiers` lacks on Linux) and refuses the rest; quotas reset at its midnight.
@Suite("Time zones", .timeLimit(.minutes(10)))
struct TimeZoneTests {
    static let accepted = [
        "Asia/Kolkata", "Asia/Calcutta", "Asia/Saigon", "Asia/Ho_Chi_Minh", "America/Argentina/Buenos_Aires", "Europe/Paris",
        "America/Indiana/Indianapolis", "Etc/GMT-14", "UTC", "GMT",
    ]
    static let refused = [
        "Mars/Base", "", "EST", "IST", "PST", "CET", "GMT+5", "GMT+05:30", "+05:30", "UTC+1", "Asia/Kolkata/", "/Asia/Kolkata",
        "Asia/Nowhere", "Asia/Kolkata\n", "Asia/" + String(repeating: "K", count: 80),
    ]

    @Test("Current IANA names are accepted and kept as sent")
    func acceptsCurrentNames() async throws {
        try await LiveServer.with(.sqlite) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            for zone in Self.accepted {
                let response = try await api.send(.patch, "/v1/me", token: user.accessToken, json: UpdateMeRequest(timezone: zone))
                #expect(response.status == .ok, "\(zone): \(response.text)")
                #expect((try? response.decode(Me.self))?.timezone == zone, "\(zone)")
            }
            await api.close()
        }
    }

    @Test("Garbage, abbreviations and offsets are 400 invalid_field and change nothing")
    func refusesTheRest() async throws {
        try await LiveServer.with(.sqlite) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            #expect(try await api.send(.patch, "/v1/me", token: user.accessToken, json: UpdateMeRequest(timezone: "Asia/Kolkata")).status == .ok)
            for zone in Self.refused {
                let response = try await api.send(.patch, "/v1/me", token: user.accessToken, json: UpdateMeRequest(timezone: zone))
                #expect(response.status == .badRequest && response.errorCode == "invalid_field", "\(zone.debugDescription): \(response.text)")
            }
            #expect(try await api.send(.get, "/v1/me", token: user.accessToken).decode(Me.self).timezone == "Asia/Kolkata")
            await api.close()
        }
    }

    @Test("Quotas reset at midnight in Asia/Kolkata (UTC+05:30)", arguments: StoreKind.allCases)
    func kolkataMidnight(kind: StoreKind) async throws {
        try await LiveServer.with(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let patched = try await api.send(.patch, "/v1/me", token: user.accessToken, json: UpdateMeRequest(timezone: "Asia/Kolkata"))
            #expect(patched.status == .ok, "\(patched.text)")
            // 2027-01-15T08:00Z is 13:30 in Kolkata: the day ends at 18:30Z.
            let midnight = Date(timeIntervalSince1970: 1_800_000_000 + 10 * 3600 + 1800)
            for _ in 0..<3 {
                let result = try await api.send(.post, "/v1/actions/reading", token: user.accessToken, headers: [.idempotencyKey: UUID().uuidString])
                #expect(try result.decode(ActionResult.self).quotas.first?.resetsAt == midnight, "\(result.text)")
            }
            server.clock.set(midnight.addingTimeInterval(-1))
            let late = try await api.send(.get, "/v1/quotas", token: user.accessToken).decode(QuotaList.self)
            #expect(late.items.first?.remaining == 0 && late.items.first?.resetsAt == midnight)
            let refused = try await api.send(.post, "/v1/actions/reading", token: user.accessToken, headers: [.idempotencyKey: UUID().uuidString])
            #expect(refused.status == .paymentRequired)
            server.clock.set(midnight)
            let fresh = try await api.send(.get, "/v1/quotas", token: user.accessToken).decode(QuotaList.self)
            #expect(fresh.items.first?.remaining == 3 && fresh.items.first?.resetsAt == midnight.addingTimeInterval(86_400))
            let free = try await api.send(.post, "/v1/actions/reading", token: user.accessToken, headers: [.idempotencyKey: UUID().uuidString])
            #expect(try free.decode(ActionResult.self).paidWith == .quota)
            await api.close()
        }
    }
}
