import Foundation
import TallyAPI
import TallyServer
import TallyStore
import Testing

/// The money invariants under real concurrency, over real HTTP, on every store.
@Suite("Ledger under concurrency", .timeLimit(.minutes(10)))
struct LedgerConcurrencyTests {
    static let catalog = try! Catalog(signupGrant: 0, quotas: [], actions: [ActionSpec(name: "debit1", tokens: 1)])

    @Test("200 concurrent 1-token debits on a 100-token wallet: exactly 100 succeed", arguments: StoreKind.allCases)
    func concurrentDebits(kind: StoreKind) async throws {
        try await LiveServer.with(kind, catalog: Self.catalog) { server in
            let admin = server.connection()
            let user = try await admin.newGuest(granted: 100)
            let statuses = try await concurrently(200, server: server) { index, connection in
                try await connection.send(
                    .post, "/v1/actions/debit1", token: user.accessToken, headers: [.idempotencyKey: "debit-\(index)"]
                ).status.code
            }
            #expect(statuses.filter { $0 == 200 }.count == 100)
            #expect(statuses.filter { $0 == 402 }.count == 100)
            let wallet = try await admin.wallet(user)
            #expect(wallet.balance == 0)
            try await admin.expectBooksBalance(user)
            await admin.close()
        }
    }

    @Test("50 concurrent retries with one Idempotency-Key charge once", arguments: StoreKind.allCases)
    func concurrentRetries(kind: StoreKind) async throws {
        try await LiveServer.with(kind, catalog: Self.catalog) { server in
            let admin = server.connection()
            let user = try await admin.newGuest(granted: 10)
            let responses = try await concurrently(50, server: server) { _, connection in
                try await connection.send(.post, "/v1/actions/debit1", token: user.accessToken, headers: [.idempotencyKey: "one-intent"])
            }
            let succeeded = responses.filter { $0.status == .ok }
            let first = try #require(succeeded.first)
            #expect(responses.allSatisfy { $0.status == .ok || ($0.status == .conflict && $0.errorCode == "idempotency_key_in_use") })
            // Every success carries the first response, byte for byte.
            #expect(Set(succeeded.map(\.body)).count == 1)
            let retry = try await admin.send(.post, "/v1/actions/debit1", token: user.accessToken, headers: [.idempotencyKey: "one-intent"])
            #expect(retry.status == .ok && retry.body == first.body && retry.headers[.idempotentReplayed] == "true")
            #expect(try await admin.wallet(user).balance == 9)
            try await admin.expectBooksBalance(user)
            await admin.close()
        }
    }

    @Test("Concurrent first guest calls with one deviceId create exactly one user", arguments: StoreKind.allCases)
    func concurrentGuestSignIn(kind: StoreKind) async throws {
        // Fifty sign-ins of one device at once: over the per-device rate limit, which is not what this tests.
        var limits = LimitsConfiguration()
        limits.guestSignInsPerDevice = RateLimit(100, per: 3600)
        try await LiveServer.with(kind, limits: limits) { server in
            let deviceId = "device-" + UUID().uuidString
            let answers = try await concurrently(50, server: server) { _, connection in
                let response = try await connection.send(.post, "/v1/auth/guest", json: GuestSignInRequest(deviceId: deviceId))
                return (status: response.status.code, userId: try response.decode(SessionTokens.self).userId)
            }
            #expect(Set(answers.map(\.userId)).count == 1)
            // One sign-in created the user (201); the other 49 signed in to it (200).
            #expect(answers.filter { $0.status == 201 }.count == 1)
            #expect(answers.filter { $0.status == 200 }.count == 49)
        }
    }

    @Test("Holds, captures and releases racing debits keep every invariant", arguments: StoreKind.allCases)
    func holdsRacingDebits(kind: StoreKind) async throws {
        try await LiveServer.with(kind, catalog: Self.catalog) { server in
            let admin = server.connection()
            let user = try await admin.newGuest(granted: 500)
            _ = try await concurrently(60, server: server) { index, connection in
                switch index % 3 {
                case 0:
                    return try await connection.send(.post, "/v1/actions/debit1", token: user.accessToken, headers: [.idempotencyKey: "d\(index)"]).status.code
                case 1:
                    let hold = try await connection.send(.post, "/v1/wallet/holds", token: user.accessToken, json: CreateHoldRequest(amount: 10, ttlSeconds: 60))
                    guard hold.status == .created else { return hold.status.code }
                    let id = try hold.decode(Hold.self).holdId
                    return try await connection.send(.post, "/v1/wallet/holds/\(id)/capture", token: user.accessToken, json: CaptureHoldRequest(amount: 7)).status.code
                default:
                    let hold = try await connection.send(.post, "/v1/wallet/holds", token: user.accessToken, json: CreateHoldRequest(amount: 5, ttlSeconds: 60))
                    guard hold.status == .created else { return hold.status.code }
                    let id = try hold.decode(Hold.self).holdId
                    return try await connection.send(.delete, "/v1/wallet/holds/\(id)", token: user.accessToken).status.code
                }
            }
            let wallet = try await admin.wallet(user)
            #expect(wallet.held == 0)
            #expect(wallet.balance == 500 - 20 * 1 - 20 * 7)
            try await admin.expectBooksBalance(user)
            await admin.close()
        }
    }
}
