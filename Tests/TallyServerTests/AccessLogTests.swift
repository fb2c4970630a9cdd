import Foundation
import HTTPTypes
import TallyAPI
import Testing

/// The access log through the server's real log handler: one line per request, with the route template,
/// status, duration and user id, and never a token, a key, an id from the path or a query string.
@Suite(.timeLimit(.minutes(10))) struct AccessLogTests {
    @Test func oneLinePerRequestWithTemplateStatusDurationAndUserButNoSecrets() async throws {
        let lines = CapturedLines()
        let (user, holdId, adminKey) = try await LiveServer.with(.sqlite, logger: lines.logger(level: .info)) { server in
            let api = server.connection()
            let user = try await api.newGuest(granted: 20)
            let hold = try await api.send(.post, "/v1/wallet/holds", token: user.accessToken, json: CreateHoldRequest(amount: 5, ttlSeconds: 60))
            let holdId = try hold.decode(Hold.self).holdId
            #expect(try await api.send(.get, "/v1/wallet/holds/\(holdId)?note=query-secret", token: user.accessToken).status == .ok)
            #expect(try await api.send(.get, "/v1/wallet", token: "forged-token-value").status == .unauthorized)
            #expect(try await api.send(.get, "/no/such/route").status == .notFound)
            await api.close()
            return (user, holdId, server.adminKey)
        }
        let requests = lines.text.split(separator: "\n").filter { $0.contains("request") && $0.contains("route=") }

        let read = requests.filter { $0.contains("route=/v1/wallet/holds/{holdId}") }
        #expect(read.count == 1, "\(requests)")
        for fragment in ["method=GET", "status=200", "user=\(user.userId)", "duration_ms="] {
            #expect(read.first?.contains(fragment) == true, "\(fragment) in \(read)")
        }
        let hold = requests.filter { $0.contains("route=/v1/wallet/holds ") || $0.hasSuffix("route=/v1/wallet/holds") }
        #expect(hold.count == 1 && hold.first?.contains("method=POST") == true && hold.first?.contains("status=201") == true, "\(requests)")
        let refused = requests.filter { $0.contains("route=/v1/wallet ") || $0.contains("status=401") }
        #expect(refused.count == 1 && refused.first?.contains("status=401") == true && refused.first?.contains("user=") == false, "\(refused)")
        #expect(requests.contains { $0.contains("route=/admin/v1/users/{userId}/grants") && $0.contains("status=201") })
        #expect(requests.contains { $0.contains("status=404") })
        #expect(requests.count == 6, "guest sign-in, grant, hold, hold read, 401, 404: \(requests)")

        let text = lines.text
        for secret in [user.accessToken, user.refreshToken, adminKey, "forged-token-value", "query-secret", holdId] {
            #expect(!text.contains(secret), "the log contains \(secret.prefix(12))…")
        }
    }

    @Test("A real tally serve: ten answered requests, then SIGTERM: all ten access-log lines are in its standard error")
    func everyLineIsWrittenBeforeTheProcessExits() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-access-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try ServerProcess(
            name: "logged", directory: directory, environment: ["TALLY_ADMIN_KEY": "access-log-admin-key-0123", "LOG_LEVEL": "info"])
        let ports = try await server.ports()
        let api = APIConnection(port: ports.api, adminPort: ports.admin, adminKey: "access-log-admin-key-0123")
        for index in 0..<10 {
            #expect(try await api.send(.get, "/health?n=\(index)").status == .ok)
        }
        await api.close()
        #expect(server.stop() == .exited(0))
        let lines = server.log.split(separator: "\n").filter { $0.contains("request method=GET route=/health status=200") }
        #expect(lines.count == 10, "\(server.log)")
    }

    @Test func belowInfoNothingIsWritten() async throws {
        let lines = CapturedLines()
        try await LiveServer.with(.sqlite, logger: lines.logger(level: .warning)) { server in
            let api = server.connection()
            _ = try await api.newGuest()
            await api.close()
        }
        #expect(!lines.text.contains("route="))
    }
}
