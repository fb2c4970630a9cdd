import Crypto
import Foundation
import TallyAPI
@testable import TallyAppStore
import TallyDevAppStore
@testable import TallyServer
import TallyStore
import TallyTestKit
import Testing

/// The verifier keeps the transactions it accepted by the SHA-256 of their exact bytes (``VerifiedPayloadCache``), so a
/// replay — the app submitting an unfinished transaction again — costs no second chain build and signature check. These
/// tests hold it to what makes that sound: only the exact bytes that passed every rule are answered from it, a refusal
/// is never kept, each verifier has its own, and it stays within its bound while answering only what was put in.
@Suite("Replays of verified App Store transactions", .timeLimit(.minutes(2)))
struct PurchaseReplayCacheTests {
    @Test("A replay is answered from the verifier's cache: the same purchase, credited once; another account still refused", arguments: StoreKind.allCases)
    func replayOverHTTP(kind: StoreKind) async throws {
        try await PurchasesTests.with(kind) { server, appStore, api in
            let verifier = try #require(server.services.configuration.appStore?.verifier)
            let user = try await api.newGuest()
            let purchase = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(uuidString: user.userId), send: false)
            let request = RedeemPurchaseRequest(signedTransaction: purchase.signedTransaction)
            let hits = verifier.transactions.hits
            var answers: [PurchaseResponse] = []
            for _ in 0..<3 {
                answers.append(try await api.send(.post, "/v1/purchases/apple", token: user.accessToken, json: request).decode())
            }
            #expect(verifier.transactions.hits - hits == 2, "the first submission verified in full, the two replays from the cache")
            try #require(answers.count == 3)
            #expect(answers.allSatisfy { $0.purchase == answers[0].purchase && $0.wallet.balance == 100 })
            #expect(answers[0].purchase.transactionId == purchase.transaction.transactionId && answers[0].purchase.status == .credited)

            // The same bytes from another account: from the cache, and still the store's refusal.
            let other = try await api.newGuest()
            let claimed = try await api.send(.post, "/v1/purchases/apple", token: other.accessToken, json: request)
            #expect(claimed.status == .conflict && claimed.errorCode == "purchase_claimed", "\(claimed.text)")
            #expect(verifier.transactions.hits - hits == 3)
            // A copy of the cached transaction with its payload changed is verified in full, and refused.
            let tampered = try appStore.signedTransaction(purchase.transaction.transactionId, defect: .tamperedPayload)
            let refused = try await api.send(
                .post, "/v1/purchases/apple", token: user.accessToken, json: RedeemPurchaseRequest(signedTransaction: tampered))
            #expect(refused.status == .badRequest && refused.errorCode == "invalid_signature", "\(refused.text)")
            #expect(try await api.wallet(user).balance == 100)
            #expect(try await api.wallet(other).balance == 0)
            try await api.expectBooksBalance(user)
        }
    }

    @Test("Only the exact bytes that passed every rule are kept; refusals are verified again each time; each verifier has its own")
    func onlyWhatPassed() async throws {
        let appStore = try TestProducts.appStore(clock: ManualClock(Date()))
        let root = appStore.authority.rootDER
        let sandbox = try AppStoreVerifier(rootCertificates: [root], bundleId: TestProducts.bundleId, environments: [.sandbox])
        let productionOnly = try AppStoreVerifier(rootCertificates: [root], bundleId: TestProducts.bundleId, environments: [.production])
        let purchase = try appStore.purchase(productId: TestProducts.tokens100, appAccountToken: UUID(), send: false)
        let signed = purchase.signedTransaction

        // Refused after its signature verified (another environment): never kept, so refused again in full.
        for _ in 0..<2 {
            #expect(await Self.outcome(productionOnly, signed) == "wrong_environment")
        }
        #expect(productionOnly.transactions.count == 0 && productionOnly.transactions.hits == 0)

        // Accepted: kept once, then the same payload from the cache.
        let first = try await sandbox.verifyTransaction(signed)
        #expect(first == purchase.transaction && sandbox.transactions.count == 1 && sandbox.transactions.hits == 0)
        let again = try await sandbox.verifyTransaction(signed)
        #expect(again == first && sandbox.transactions.hits == 1)
        // The other verifier's rules still hold for those bytes: its own cache never had them.
        #expect(await Self.outcome(productionOnly, signed) == "wrong_environment")

        // The same transaction in other bytes is verified in full: a changed payload, another chain, a changed signature.
        let id = purchase.transaction.transactionId
        var parts = signed.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        var signature = Array(parts[2])
        signature[20] = signature[20] == "A" ? "B" : "A"
        parts[2] = String(signature)
        let variants = [
            (try appStore.signedTransaction(id, defect: .tamperedPayload), "invalid_signature"),
            (try appStore.signedTransaction(id, defect: .otherRoot), "untrusted_chain"),
            (try appStore.signedTransaction(id, defect: .leafWithoutAppleOID), "untrusted_chain"),
            (parts.joined(separator: "."), "invalid_signature"),
        ]
        for (variant, code) in variants {
            #expect(variant != signed)
            #expect(await Self.outcome(sandbox, variant) == code)
        }
        #expect(sandbox.transactions.count == 1 && sandbox.transactions.hits == 1)
        // The key is the digest of the bytes as received.
        #expect(VerifiedPayloadCache<Int>.key(signed) == SHA256.hash(data: Data(signed.utf8)))
    }

    @Test("The cache keeps at most its capacity, always what was touched among the last capacity/2 keys, and answers only what was put under a key")
    func boundedAndExact() {
        for seed in UInt64(1)...5 {
            var random = SplitMix64(seed: seed)
            let capacity = 64, generation = capacity / 2
            let cache = VerifiedPayloadCache<Int>(capacity: capacity)
            let keys = (0..<300).map { VerifiedPayloadCache<Int>.key("jws-\(seed)-\($0)") }
            var latest: [Int: Int] = [:]  // key index -> the value last put under it
            var recent: [Int] = []  // key indices, most recently inserted or found first
            var (found, missed, value) = (0, 0, 0)
            for step in 0..<20_000 {
                let index = Int.random(in: 0..<keys.count, using: &random)
                if Bool.random(using: &random), index < 250 {  // keys 250..<300 are never put in
                    value += 1
                    cache.insert(value, for: keys[index])
                    latest[index] = value
                    recent.removeAll { $0 == index }
                    recent.insert(index, at: 0)
                } else if let answer = cache.payload(for: keys[index]) {
                    found += 1
                    #expect(answer == latest[index], "seed \(seed) step \(step): key \(index) answered \(answer), put \(String(describing: latest[index]))")
                    recent.removeAll { $0 == index }
                    recent.insert(index, at: 0)
                } else {
                    missed += 1
                    let position = recent.firstIndex(of: index)
                    #expect(position.map { $0 >= generation } ?? true, "seed \(seed) step \(step): key \(index), touched \(position ?? -1) keys ago, was dropped")
                }
                #expect(cache.count <= capacity)
            }
            #expect(found > 1_000 && missed > 1_000, "seed \(seed): the property saw hits (\(found)) and misses (\(missed))")
            #expect(cache.hits == found)
        }
    }

    /// The refusal's code, or "accepted".
    static func outcome(_ verifier: AppStoreVerifier, _ signed: String) async -> String {
        do {
            _ = try await verifier.verifyTransaction(signed)
            return "accepted"
        } catch {
            return error.code.rawValue
        }
    }
}
