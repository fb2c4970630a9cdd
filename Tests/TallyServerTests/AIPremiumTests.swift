import Foundation
import HTTPTypes
import TallyAPI
import TallyDevLLM
@testable import TallyServer
import TallyStore
import Testing

/// A model's `premium` through the real server on both stores, with `tally-dev dev-llm` upstream: a premium user's calls
/// on a `free` model hold and cost 0 tokens and are recorded with the provider's counts; on a `quota` model each takes
/// one use of the quota, given back when the upstream fails; everyone else pays tokens as always.
@Suite("AI premium models", .timeLimit(.minutes(3)))
struct AIPremiumTests {
    static let price = (prompt: 10, completion: 5, cap: 40)
    static func model(_ name: String, _ premium: AIPremiumUse) -> AIModelSpec {
        AIModelSpec(
            name: name, upstreamModel: "dev", promptTokensPerCredit: price.prompt, completionTokensPerCredit: price.completion,
            maxCompletionTokens: price.cap, premium: premium)
    }
    static let models = [model("paid", .tokens), model("free", .free), model("counted", .quota("answers"))]
    /// Two premium answers a day on `counted`.
    static let catalog = try! Catalog(signupGrant: 0, quotas: [QuotaSpec(name: "answers", daily: 2), QuotaSpec(name: "readings", daily: 3)], actions: [ActionSpec(name: "ai.query", tokens: 3)])
    static let premiumUntil = Date(timeIntervalSince1970: 1_800_000_000 + 30 * 86_400)

    /// A server on `kind` offering ``models`` from a local model.
    static func with(_ kind: StoreKind, _ body: @Sendable (LiveServer, DevLLMClient) async throws -> Void) async throws {
        try await DevLLMTests.with { upstream in
            try await LiveServer.with(kind, catalog: Self.catalog, configure: { configuration in
                configuration.ai = AIConfiguration(
                    upstream: AIUpstream(baseURL: "http://127.0.0.1:\(upstream.port)/v1", apiKey: DevLLMTests.key), models: Self.models)
            }) { server in try await body(server, upstream) }
        }
    }

    /// A guest granted `tokens` (none: 0), premium through the admin API when `premium`.
    static func user(_ api: APIConnection, premium: Bool, tokens: Int64 = 0) async throws -> TestUser {
        let user = try await (tokens > 0 ? api.newGuest(granted: tokens) : api.newGuest())
        if premium {
            let set = try await api.send(.put, "/admin/v1/users/\(user.userId)/premium", admin: true, json: PremiumRequest(until: premiumUntil))
            #expect(set.status == .ok, "\(set.text)")
        }
        return user
    }

    static let question = "What do the stars say?"

    /// One call on `model`, streamed or not: the response, and the charge it reports (`Tally-Charge`, or the stream's
    /// `tally.charge` event) when it answered 200.
    static func call(_ api: APIConnection, _ user: TestUser, model: String, stream: Bool) async throws -> (APIResponse, AICharge?) {
        let response = try await api.send(
            .post, "/v1/ai/chat/completions", token: user.accessToken, json: AIGatewayTests.chat(question, stream: stream, model: model))
        guard response.status == .ok else { return (response, nil) }
        let text: String?
        if stream {
            // The whole stream, read to its end: the charge is the data of the event after [DONE].
            let events = response.text.components(separatedBy: "\n\n")
            let event = events.first(where: { $0.hasPrefix("event: \(AIGatewayProtocol.chargeEvent)\n") }) ?? ""
            text = event.split(separator: "\n").first(where: { $0.hasPrefix("data:") }).map { String($0.dropFirst(5)).trimmingCharacters(in: .whitespaces) }
        } else {
            text = response.headers[.tallyCharge]
        }
        return (response, try text.map { try JSONDecoder.tallyAPI.decode(AICharge.self, from: Data($0.utf8)) })
    }

    /// What dev-llm bills for ``question`` and the answer's words (the completion's tokens, within the cap).
    static var usage: (prompt: Int, completion: Int) {
        let messages = [ChatMessage(role: "user", content: question)]
        return (DevAnswer.promptTokens(messages), DevAnswer.words(for: messages, length: nil, limit: price.cap).words.count)
    }

    /// The user's hold, capture and release entries, newest first.
    static func aiEntries(_ api: APIConnection, _ user: TestUser) async throws -> [LedgerEntry] {
        try await api.allEntries(user).filter { ["hold", "capture", "release"].contains($0.kind) }
    }

    @Test("A premium user's calls on a free model cost 0 tokens at balance 0, streamed or not, and are recorded with the provider's counts", arguments: StoreKind.allCases)
    func freeModel(_ kind: StoreKind) async throws {
        try await Self.with(kind) { server, upstream in
            let api = server.connection()
            let premium = try await Self.user(api, premium: true)
            let (prompt, completion) = Self.usage
            let wouldCost = Self.model("free", .free).cost(promptTokens: prompt, completionTokens: completion)
            for stream in [false, true] {
                let (response, charge) = try await Self.call(api, premium, model: "free", stream: stream)
                #expect(response.status == .ok, "stream \(stream): \(response.text)")
                let report = try #require(charge, "stream \(stream): no charge in \(response.text.suffix(300))")
                #expect(report.charged == 0 && report.held == 0, "\(report)")
                #expect(report.promptTokens == prompt && report.completionTokens == completion, "the provider's counts: \(report)")
                #expect(report.wallet.balance == 0 && report.wallet.held == 0)
            }
            #expect(try await upstream.stats().completions == 2)
            // The ledger has each call: a hold of 0 saying why, and a capture of 0 with the counts and what it would have cost.
            let entries = try await Self.aiEntries(api, premium)
            #expect(entries.map(\.kind) == ["capture", "hold", "capture", "hold"], "\(entries)")
            #expect(entries.allSatisfy { $0.amount == 0 && $0.heldChange == 0 }, "\(entries)")
            for capture in entries where capture.kind == "capture" {
                #expect(capture.reason?.hasSuffix("ai free prompt=\(prompt) completion=\(completion) (premium: would cost \(wouldCost))") == true, "\(capture)")
            }
            for hold in entries where hold.kind == "hold" { #expect(hold.reason?.hasSuffix("(premium: free)") == true, "\(hold)") }
            // The operator's spending by model (the console's overview) counts both calls, at 0 tokens.
            let (_, signedIn) = try await ConsoleTests.signIn(api, key: server.adminKey)
            let page = try await ConsoleTests.get(api, "/", cookie: try #require(signedIn).cookie).text
            let row = try ConsoleSpendingTests.spendingRows(page).first { $0.label == "AI free" }
            #expect(row?.calls == 2 && row?.tokens == 0, "\(String(describing: row))")
            try await api.expectBooksBalance(premium)

            // Premium does not reach a model priced in tokens; nor does a free model lift anything for others.
            let (paidByPremium, _) = try await Self.call(api, premium, model: "paid", stream: false)
            #expect(paidByPremium.status == .paymentRequired && paidByPremium.errorCode == "insufficient_tokens", "\(paidByPremium.text)")
            let poor = try await Self.user(api, premium: false)
            for stream in [false, true] {
                let (refused, _) = try await Self.call(api, poor, model: "free", stream: stream)
                #expect(refused.status == .paymentRequired && refused.errorCode == "insufficient_tokens", "\(refused.text)")
            }
            #expect(try await upstream.stats().completions == 2, "no upstream call for a refused hold")
            let payer = try await Self.user(api, premium: false, tokens: 100)
            let held = try AIGatewayTests.bound(Self.question).maxCost
            for stream in [false, true] {
                let (response, charge) = try await Self.call(api, payer, model: "free", stream: stream)
                #expect(response.status == .ok && charge?.charged == wouldCost && charge?.held == held, "\(response.text)")
            }
            #expect(try await api.wallet(payer).balance == 100 - 2 * wouldCost)
            try await api.expectBooksBalance(payer)
            await api.close()
        }
    }

    @Test("A premium user's calls on a quota model take its uses (402 quota_exhausted beyond, nothing called); a failed upstream gives the use back", arguments: StoreKind.allCases)
    func quotaModel(_ kind: StoreKind) async throws {
        try await Self.with(kind) { server, upstream in
            let api = server.connection()
            let premium = try await Self.user(api, premium: true)
            func used() async throws -> Int? {
                try await api.send(.get, "/v1/quotas", token: premium.accessToken).decode(QuotaList.self).items.first(where: { $0.name == "answers" })?.used
            }
            // The upstream fails before answering, streamed and not: nothing charged, the uses given back.
            try await upstream.script([DevBehaviour(status: 500), DevBehaviour(status: 500)])
            for stream in [false, true] {
                let (failed, _) = try await Self.call(api, premium, model: "counted", stream: stream)
                #expect(failed.status == .badGateway && failed.errorCode == "upstream_failed", "\(failed.text)")
            }
            #expect(try await used() == 0)
            // Two uses a day: one call of each kind.
            for stream in [false, true] {
                let (response, charge) = try await Self.call(api, premium, model: "counted", stream: stream)
                #expect(response.status == .ok && charge?.charged == 0 && charge?.held == 0, "\(response.text)")
                #expect(charge?.promptTokens == Self.usage.prompt && charge?.completionTokens == Self.usage.completion)
            }
            #expect(try await used() == 2)
            #expect(try await upstream.stats().completions == 4)
            // The quota that counts them is not unlimited to this premium user; a quota no model counts still is.
            let shown = try await api.send(.get, "/v1/quotas", token: premium.accessToken).decode(QuotaList.self).items
            #expect(shown.first(where: { $0.name == "answers" }).map { !$0.unlimited && $0.remaining == 0 } == true, "\(shown)")
            #expect(shown.first(where: { $0.name == "readings" })?.unlimited == true, "\(shown)")
            for stream in [false, true] {
                let (refused, _) = try await Self.call(api, premium, model: "counted", stream: stream)
                #expect(refused.status == .paymentRequired && refused.errorCode == "quota_exhausted", "\(refused.text)")
                let quotas = try refused.decode(ErrorResponse.self).quotas ?? []
                #expect(quotas.first(where: { $0.name == "answers" })?.used == 2, "\(quotas)")
            }
            #expect(try await upstream.stats().completions == 4, "no upstream call beyond the quota")
            let entries = try await Self.aiEntries(api, premium)
            #expect(entries.map(\.kind) == ["capture", "hold", "capture", "hold", "release", "hold", "release", "hold"], "\(entries)")
            #expect(entries.allSatisfy { $0.amount == 0 && $0.heldChange == 0 }, "\(entries)")
            #expect(entries.filter { $0.kind == "hold" }.allSatisfy { $0.reason?.hasSuffix("(premium: quota answers)") == true }, "\(entries)")
            #expect(try await api.wallet(premium).balance == 0)
            try await api.expectBooksBalance(premium)

            // The quota's next window (the guest's time zone is UTC: midnight is 16 hours after 08:00Z) has two uses again.
            server.clock.advance(by: 16 * 3600)
            let (next, nextCharge) = try await Self.call(api, premium, model: "counted", stream: false)
            #expect(next.status == .ok && nextCharge?.charged == 0, "\(next.text)")
            #expect(try await used() == 1)

            // Someone not premium pays tokens on the same model and takes no use.
            let payer = try await Self.user(api, premium: false, tokens: 100)
            let wouldCost = Self.model("counted", .quota("answers")).cost(promptTokens: Self.usage.prompt, completionTokens: Self.usage.completion)
            for stream in [false, true] {
                let (response, charge) = try await Self.call(api, payer, model: "counted", stream: stream)
                #expect(response.status == .ok && charge?.charged == wouldCost, "\(response.text)")
            }
            let payerQuotas = try await api.send(.get, "/v1/quotas", token: payer.accessToken).decode(QuotaList.self).items
            #expect(payerQuotas.first(where: { $0.name == "answers" })?.used == 0, "\(payerQuotas)")
            #expect(try await api.wallet(payer).balance == 100 - 2 * wouldCost)
            try await api.expectBooksBalance(payer)
            await api.close()
        }
    }
}
