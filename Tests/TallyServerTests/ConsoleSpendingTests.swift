import Foundation
import TallyAPI
@testable import TallyServer
import TallyStore
import Testing

/// The overview's "Spending by action" with real AI traffic (issue 43, finding 14: every AI call was its own row, named
/// by its hold id and token counts; "1 accounts"): one row per model with its calls and tokens, one for the holds of the
/// wallet API, labels whole in the table and the chart, counts in the singular when they are one.
@Suite("Console spending", .timeLimit(.minutes(3)))
struct ConsoleSpendingTests {
    static let longName = "a-model-whose-name-is-longer-than-any-cut-was"

    @Test("AI calls are grouped by model, wallet holds in one row, labels whole, one account in the singular", arguments: StoreKind.allCases)
    func spendingByModel(kind: StoreKind) async throws {
        let long = AIModelSpec(name: Self.longName, upstreamModel: "dev", promptTokensPerCredit: 10, completionTokensPerCredit: 5, maxCompletionTokens: 40)
        try await DevLLMTests.with { upstream in
            try await LiveServer.with(kind, configure: { configuration in
                configuration.ai = AIConfiguration(
                    upstream: AIUpstream(baseURL: "http://127.0.0.1:\(upstream.port)/v1", apiKey: DevLLMTests.key),
                    models: [AIGatewayTests.model, long])
            }) { server in
                let api = server.connection()
                defer { Task { await api.close() } }
                let user = try await api.newGuest(granted: 10_000)
                let calls = [(AIGatewayTests.model.name, 3), (Self.longName, 2)]
                for (model, count) in calls {
                    for index in 0..<count {
                        let answer = try await api.send(
                            .post, "/v1/ai/chat/completions", token: user.accessToken,
                            json: AIGatewayTests.chat("Question \(index) for \(model)", model: model))
                        #expect(answer.status == .ok, "\(answer.text)")
                    }
                }
                #expect(try await AIGatewayTests.settled(api, user).held == 0)
                let hold = try await api.send(.post, "/v1/wallet/holds", token: user.accessToken, json: CreateHoldRequest(amount: 30, ttlSeconds: 60))
                let holdId = try hold.decode(Hold.self).holdId
                #expect(try await api.send(.post, "/v1/wallet/holds/\(holdId)/capture", token: user.accessToken, json: CaptureHoldRequest(amount: 12)).status == .ok)
                _ = try await api.newGuest()  // two guests: the plural stays
                let account = try await api.newGuest()
                #expect(try await api.send(
                    .post, "/v1/auth/link", token: account.accessToken,
                    json: CredentialsRequest(email: "spender-\(UUID().uuidString.prefix(6).lowercased())@example.com", password: "correct horse")
                ).status == .ok)

                // What each group should show, from the ledger over HTTP.
                let captures = try await api.allEntries(user).filter { $0.kind == "capture" }
                func spent(_ model: String) -> (calls: Int, tokens: Int64) {
                    let mine = captures.filter { $0.reason?.contains(" ai \(model) ") == true }
                    return (mine.count, -mine.map(\.amount).reduce(0, +))
                }
                let (_, signedIn) = try await ConsoleTests.signIn(api, key: server.adminKey)
                let page = try await ConsoleTests.get(api, "/", cookie: try #require(signedIn).cookie).text
                let rows = try Self.spendingRows(page)
                var expected: [String: (calls: Int, tokens: Int64)] = ["holds (wallet API)": (1, 12)]
                for (model, count) in calls {
                    expected["AI \(model)"] = spent(model)
                    #expect(spent(model).calls == count)
                }
                #expect(rows.count == expected.count, "\(rows)")
                for (label, numbers) in expected {
                    let row = rows.first { $0.label == label }
                    #expect(row?.calls == numbers.calls && row?.tokens == numbers.tokens, "\(label): \(String(describing: row)) in \(rows)")
                }
                #expect(!rows.contains { $0.label.contains(holdId) || $0.label.contains("prompt=") }, "no row is one call")
                // The chart names each group whole (it cut labels at 20 characters).
                let chart = try #require(page.range(of: "Tokens spent by action").map { String(page[$0.lowerBound...]) })
                #expect(chart.contains(">AI \(Self.longName)</text>"), "the long label whole in the chart")
                // One account, in the singular; guests in the plural.
                #expect(page.contains(" · 1 account</p>") && !page.contains("1 accounts"), "\(page.components(separatedBy: "<h2>Users</h2>").last?.prefix(200) ?? "")")
                #expect(page.contains(" guests · "))
            }
        }
    }

    /// The rows of the overview's spending table: label, calls, tokens.
    static func spendingRows(_ page: String) throws -> [(label: String, calls: Int, tokens: Int64)] {
        let section = try #require(page.components(separatedBy: "Spending by action").dropFirst().first?.components(separatedBy: "</table>").first)
        let body = try #require(section.components(separatedBy: "<tbody>").last)
        return body.components(separatedBy: "<tr>").dropFirst().compactMap { row in
            let cells = row.components(separatedBy: "<td").dropFirst().map { cell in
                String(cell.drop { $0 != ">" }.dropFirst().prefix { $0 != "<" })
            }
            guard cells.count == 3, let calls = Int(cells[1]), let tokens = Int64(cells[2]) else { return nil }
            return (cells[0], calls, tokens)
        }
    }
}
