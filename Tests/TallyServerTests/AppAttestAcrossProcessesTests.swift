import Crypto
import Foundation
import HTTPTypes
import TallyAPI
import TallyDevAppStore
import TallyLoad
@testable import TallyServer
import TallyStore
import TallyTestKit
import TallyTestSupport
import Testing

/// One assertion sent to two `tally serve` processes on one PostgreSQL at once: its counter is accepted by one process
/// only (the store's compare-and-set), so the free reading it asserts is spent once and every other copy is flagged
/// as a replay.
@Suite("App Attest across server processes", .timeLimit(.minutes(3)))
struct AppAttestAcrossProcessesTests {
    @Test("8 copies of one asserted reading over two processes: one free use, seven replays flagged")
    func oneAssertionTwoProcesses() async throws {
        let clock = ManualClock(Date())
        let appStore = try TestProducts.appStore(clock: clock)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tally-appattest-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let root = directory.appendingPathComponent("appattest-root.pem")
        try Data(appStore.appAttest.rootCertificatePEM.utf8).write(to: root)
        let config = """
            guestSignupsPerIPPerHour: 100000
            appAttest: {teamId: \(AppAttestServerTests.teamId), bundleId: \(TestProducts.bundleId), environment: development, mode: enforce, rootCertificates: [\(root.path)]}
            """
        try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
            try await ServerPair.with(url: url, config: config) { pair in
                let api = pair.connection(0)
                let device = AppAttestServerTests.Device(appStore)
                let guest = try AppAttestServerTests.user(try await device.signIn(api, attestation: try await device.attestation(api)))
                let key = UUID().uuidString
                let header = try device.assertion("POST", "/v1/actions/reading", nonce: key)
                let answers = try await concurrently(8, connect: { pair.connection($0 % 2) }) { _, api in
                    try await api.send(
                        .post, "/v1/actions/reading", token: guest.accessToken, headers: [.idempotencyKey: key, .tallyAssertion: header])
                }
                let fresh = answers.filter { $0.status == .ok && $0.headers[HTTPField.Name("Idempotent-Replayed")!] == nil }
                #expect(fresh.count == 1, "\(answers.map { "\($0.status) \($0.errorCode ?? "")" })")
                #expect(try fresh.first?.decode(ActionResult.self).paidWith == .quota)
                // Every other copy was refused (403: free uses need a valid assertion, tokens cannot pay), still in
                // flight (409), or answered the first one's result (a replay): none spent a second free use.
                for answer in answers where !fresh.contains(where: { $0.text == answer.text && $0.status == answer.status }) {
                    #expect(
                        answer.errorCode == "attestation_required" || answer.errorCode == "idempotency_key_in_use" || answer.status == .ok,
                        "\(answer.status) \(answer.text)")
                }
                let quotas: QuotaList = try await pair.connection(1).send(.get, "/v1/quotas", token: guest.accessToken).decode()
                #expect(quotas.items.first { $0.name == "readings" }?.used == 1)
                // The console's flag on the user: the seven copies that reached the counter after it rose.
                let op = try #require(try await ConsoleTests.signIn(api, key: pair.adminKey).1)
                let page = try await ConsoleTests.get(api, "/console/users/\(guest.userId)", cookie: op.cookie)
                #expect(page.text.contains("7, the last") && page.text.contains("(counter_not_increased)"), "\(page.text.prefix(4000))")
                await api.close()
                #expect(pair.stop() == [.exited(0), .exited(0)])
            }
        }
    }
}
