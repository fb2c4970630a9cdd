import Foundation
import TallyAPI
import Testing

@testable import TallyServer

/// The hand-written JSON of the hottest replies must be byte for byte what the API's `JSONEncoder` writes:
/// stored replies are replayed as stored, and clients decode either.
@Suite("Hand-written JSON", .timeLimit(.minutes(1)))
struct JSONWriterTests {
    static let encoder = TallyJSON.encoder()

    static let names = [
        "reading", "ai.query", "", "quote\"s", "back\\slash", "a/b", "tab\tnew\nline\r", "\u{01}\u{1F}\u{7F}", "é ü 日本",
        "emoji 🎉", "\u{08}\u{0C}",
    ]

    /// The seed of the random cases: fixed, so a failure repeats on the next run; each failure names it and
    /// the iteration.
    static let seed: UInt64 = 0x7A11_0000_1503_0018

    static func randomDate(_ generator: inout some RandomNumberGenerator) -> Date {
        switch Int.random(in: 0..<4, using: &generator) {
        case 0: Date(timeIntervalSince1970: Double(Int64.random(in: -5_000_000_000...10_000_000_000, using: &generator)))
        case 1: Date(timeIntervalSince1970: Double(Int64.random(in: -100_000_000_000...100_000_000_000, using: &generator)) / 1000)
        case 2: Date(millis: Int64.random(in: 1_700_000_000_000...1_900_000_000_000, using: &generator))
        default: Date(timeIntervalSince1970: Double.random(in: -1e9...4e9, using: &generator))
        }
    }

    static func randomInt64(_ generator: inout some RandomNumberGenerator) -> Int64 {
        [0, 1, -1, 9, 10, Int64.max, Int64.min, Int64.random(in: .min ... .max, using: &generator),
         Int64.random(in: -1000...1000, using: &generator)].randomElement(using: &generator)!
    }

    static func randomQuotas(_ generator: inout some RandomNumberGenerator) -> [Quota] {
        (0..<Int.random(in: 0...3, using: &generator)).map { _ in
            Quota(
                name: names.randomElement(using: &generator)!, limit: Int(randomInt64(&generator) / 4),
                used: Int(randomInt64(&generator) / 4), resetsAt: randomDate(&generator),
                unlimited: Bool.random(using: &generator))
        }
    }

    static func randomWallet(_ generator: inout some RandomNumberGenerator) -> Wallet {
        Wallet(balance: randomInt64(&generator) / 2, held: randomInt64(&generator) / 2, version: randomInt64(&generator))
    }

    @Test("An action reply, its wallet and its quotas are written exactly as JSONEncoder writes them")
    func matchesEncoder() throws {
        var generator = SplitMix64(seed: Self.seed)
        for iteration in 0..<2_000 {
            let quotas = Self.randomQuotas(&generator)
            let wallet = Self.randomWallet(&generator)
            let result = ActionResult(
                action: Self.names.randomElement(using: &generator)!,
                paidWith: [.quota, .tokens, .premium].randomElement(using: &generator)!,
                tokensCharged: Self.randomInt64(&generator), wallet: wallet, quotas: quotas)
            let expected = [UInt8](try Self.encoder.encode(result))
            let written = JSONWriter.bytes(of: result)
            let origin = "seed \(Self.seed), iteration \(iteration)"
            #expect(written == expected, "\(origin)\n\(String(decoding: written, as: UTF8.self))\n\(String(decoding: expected, as: UTF8.self))")
            #expect(JSONWriter.bytes(of: wallet) == [UInt8](try Self.encoder.encode(wallet)), "\(origin)")
            #expect(try JSONResponse.bytes(result) == expected, "the response path takes the hand-written form; \(origin)")
        }
    }

    @Test("Holds, ledger entries, grants, quota lists and errors are written exactly as JSONEncoder writes them")
    func holdsEntriesAndGrants() throws {
        var generator = SplitMix64(seed: Self.seed)
        for iteration in 0..<2_000 {
            let wallet = Self.randomWallet(&generator)
            let hold = Hold(
                holdId: Self.names.randomElement(using: &generator)!, amount: Self.randomInt64(&generator),
                status: Self.names.randomElement(using: &generator)!,
                capturedAmount: Bool.random(using: &generator) ? Self.randomInt64(&generator) : nil,
                expiresAt: Self.randomDate(&generator), wallet: wallet)
            let entry = LedgerEntry(
                id: Self.randomInt64(&generator), kind: Self.names.randomElement(using: &generator)!,
                amount: Self.randomInt64(&generator), heldChange: Self.randomInt64(&generator),
                balanceAfter: Self.randomInt64(&generator),
                reason: Bool.random(using: &generator) ? Self.names.randomElement(using: &generator)! : nil,
                createdAt: Self.randomDate(&generator))
            let grant = GrantResponse(entry: entry, wallet: wallet)
            let quotas = Self.randomQuotas(&generator)
            let refusal = ErrorResponse(
                error: ErrorDetail(
                    code: ErrorCode(rawValue: Self.names.randomElement(using: &generator)!),
                    message: Self.names.randomElement(using: &generator)!),
                wallet: Bool.random(using: &generator) ? wallet : nil, quotas: Bool.random(using: &generator) ? quotas : nil)
            for (written, expected) in [
                (try JSONResponse.bytes(QuotaList(items: quotas)), [UInt8](try Self.encoder.encode(QuotaList(items: quotas)))),
                (try JSONResponse.bytes(refusal), [UInt8](try Self.encoder.encode(refusal))),
                (try JSONResponse.bytes(hold), [UInt8](try Self.encoder.encode(hold))),
                (try JSONResponse.bytes(entry), [UInt8](try Self.encoder.encode(entry))),
                (try JSONResponse.bytes(grant), [UInt8](try Self.encoder.encode(grant))),
            ] {
                #expect(
                    written == expected,
                    "seed \(Self.seed), iteration \(iteration)\n\(String(decoding: written, as: UTF8.self))\n\(String(decoding: expected, as: UTF8.self))")
            }
        }
    }

    @Test("Purchase answers (a consumable, a subscription, with and without premium) are written exactly as JSONEncoder writes them")
    func purchases() throws {
        var generator = SplitMix64(seed: Self.seed)
        for iteration in 0..<2_000 {
            let purchase = Purchase(
                transactionId: Self.names.randomElement(using: &generator)!, originalTransactionId: Self.names.randomElement(using: &generator)!,
                productId: Self.names.randomElement(using: &generator)!,
                kind: [.consumable, .subscription, PurchaseKind(rawValue: Self.names.randomElement(using: &generator)!)].randomElement(using: &generator)!,
                tokens: Bool.random(using: &generator) ? Self.randomInt64(&generator) : nil,
                premiumUntil: Bool.random(using: &generator) ? Self.randomDate(&generator) : nil,
                environment: Self.names.randomElement(using: &generator)!,
                status: [.credited, .refunded, PurchaseStatus(rawValue: Self.names.randomElement(using: &generator)!)].randomElement(using: &generator)!,
                purchasedAt: Self.randomDate(&generator))
            let answer = PurchaseResponse(
                purchase: purchase, wallet: Self.randomWallet(&generator),
                premiumUntil: Bool.random(using: &generator) ? Self.randomDate(&generator) : nil)
            for (written, expected) in [
                (try JSONResponse.bytes(answer), [UInt8](try Self.encoder.encode(answer))),
                (try JSONResponse.bytes(purchase), [UInt8](try Self.encoder.encode(purchase))),
            ] {
                #expect(
                    written == expected,
                    "seed \(Self.seed), iteration \(iteration)\n\(String(decoding: written, as: UTF8.self))\n\(String(decoding: expected, as: UTF8.self))")
            }
        }
    }

    @Test("Dates across centuries and around the epoch", arguments: [
        -62_135_596_800.0, -12_219_292_800.5, -12_219_292_800, -2_208_988_800.5, -1.0, -0.001, 0, 0.999, 951_782_400, 4_102_444_799.999, 253_402_300_799,
    ])
    func dates(_ seconds: Double) throws {
        let quota = Quota(name: "q", limit: 3, used: 1, resetsAt: Date(timeIntervalSince1970: seconds), unlimited: false)
        #expect(JSONWriter.bytes(of: quota) == [UInt8](try Self.encoder.encode(quota)))
    }
}
