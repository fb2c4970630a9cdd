import ExampleSupport
import Foundation
import OracleCore
import TallyClient
import Testing

/// Questions about pictures in the oracle (issue 44): a face reading from a photo, a question about a picture and one
/// about a clip's three frames, through a real `tally serve` whose `ai:` section calls a real `tally-dev dev-llm`. The
/// model's answer names each image's size, and its usage counts each image by OpenAI's tile rule, so the holds and
/// charges here are the ones a provider's would give.
@Suite("Oracle: questions about pictures", .serialized, .timeLimit(.minutes(2)))
@MainActor
struct PictureTests {
    /// A fixture's bytes (`Fixtures/`, made by `make-fixtures.py`; each name carries its size).
    static func fixture(_ name: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/\(name)"))
    }

    static let face = "face-480x640.jpg"
    static let sunset = "sunset-1200x600.jpg"
    static let frames = (1...3).map { "ball-frame\($0)-320x240.jpg" }

    /// The prompt tokens of one `width`×`height` image at `auto` detail by tally.yaml's rule (OpenAI's tiles).
    static func imageTokens(_ width: Int, _ height: Int) -> Int {
        AIImageRule().tokens(width: width, height: height, detail: .auto)
    }

    /// The newest `count` ledger entries, newest first.
    static func newestEntries(_ client: Client, _ count: Int) async throws -> [LedgerEntry] {
        for try await page in client.ledgerPages(pageSize: count) { return Array(page.prefix(count)) }
        return []
    }

    /// The wallet on the server now.
    static func serverWallet(_ session: OracleSession) async throws -> Wallet {
        try await session.client.fetch(session.client.walletQuery, forceRefresh: true)
    }

    /// What one answered question proves about its money: the server held exactly the price the app showed, the
    /// ledger's capture is the charge the app was told, priced from the model's usage at tally.yaml's prices, never
    /// above the price; the wallet lost exactly that and the screen shows the server's wallet. Returns the charge.
    @discardableResult
    static func expectCharged(
        _ reply: AIChatReply, price: Int64, imageTokens: Int, before: Wallet, _ session: OracleSession
    ) async throws -> AICharge {
        let charge = try #require(reply.charge)
        #expect(charge.held == price, "the server held what the app priced")
        #expect(charge.charged > 0 && charge.charged <= price, "charged what was used, never above the price")
        #expect(charge.promptTokens > imageTokens, "the images' tokens and the prompt's")
        let model = try await session.client.ai.model(named: OracleSession.visionModel)
        #expect(charge.charged == model.cost(promptTokens: charge.promptTokens, completionTokens: charge.completionTokens))

        let entries = try await newestEntries(session.client, 2)
        let (capture, hold) = (try #require(entries.first), try #require(entries.last))
        #expect(hold.kind == "hold" && hold.heldChange == price && hold.amount == 0)
        #expect(hold.reason?.hasSuffix(" images=\(imageTokens)") == true, "held for the images by their pixel sizes: \(hold.reason ?? "")")
        #expect(capture.kind == "capture" && capture.amount == -charge.charged && capture.heldChange == -price)
        #expect(capture.reason?.contains("ai vision prompt=\(charge.promptTokens) completion=\(charge.completionTokens)") == true)

        let after = try await serverWallet(session)
        #expect(after.balance == before.balance - charge.charged && after.held == 0, "the wallet lost exactly the ledger's charge")
        #expect(charge.wallet.balance == after.balance && session.wallet?.balance == after.balance && session.wallet?.held == 0)
        return charge
    }

    /// Grants `amount` tokens and waits until the screen shows them (from the server's events).
    static func grant(_ amount: Int, _ server: TallyServer, _ session: OracleSession, available: Int64) async throws {
        try await server.grant(amount, to: try await OracleTests.userId(session))
        try await OracleTests.eventually { session.wallet?.available == available }
        guard session.wallet?.available != available else { return }
        // Where a wallet that did not arrive stopped: in the client's cache, on the screen, or on the server (read last,
        // as reading it refreshes the cache).
        let (cached, shown) = (session.client.value(session.client.walletQuery), session.wallet)
        Issue.record("the grant did not reach the screen: cache \(String(describing: cached)), screen \(String(describing: shown)), server \(try await serverWallet(session))")
    }

    /// ``OracleTests/withModel(_:)`` with the screen following the server (a `.task`) and `tokens` granted and shown.
    static func withTokens(_ tokens: Int, _ body: @MainActor (TallyServer, DevLLM, OracleSession) async throws -> Void) async throws {
        try await OracleTests.withModel { server, _, model, session, _ in
            let follower = Task { await session.follow() }
            defer { follower.cancel() }
            if tokens > 0 { try await Self.grant(tokens, server, session, available: Int64(tokens)) }
            try await body(server, model, session)
        }
    }

    @Test("A face reading from a photo: priced before asking, answered about the photo, charged what the ledger captured, at most the price")
    func faceReading() async throws {
        try await Self.withTokens(20) { _, model, session in
            let photo = try Self.fixture(Self.face)

            let price = try await session.price(.faceReading(photo: photo))
            #expect(session.pictureCost == price && session.canAskAboutPicture)
            #expect((2...10).contains(price), "a few tokens: \(price)")
            let before = try await Self.serverWallet(session)
            let asked = try await model.stats().completions

            let reply = try #require(try await session.faceReading(photo: photo))
            #expect(reply.text.hasPrefix("I see a 480×640 JPEG."), "the model saw the photo: \(reply.text)")
            #expect(session.pictureAnswer == reply.text && session.notice == nil)
            #expect(Self.imageTokens(480, 640) == 425, "1 × 2 tiles")
            let listed = try await session.client.ai.model(named: OracleSession.visionModel)
            #expect(listed.images == AIImageRule(), "tally.yaml writes OpenAI's tile rule and the issue's limits")
            try await Self.expectCharged(reply, price: price, imageTokens: 425, before: before, session)
            #expect(try await model.stats().completions == asked + 1, "one call of the model")
        }
    }

    @Test("A question about a picture is answered about that picture and charged by its pixel size")
    func pictureQuestion() async throws {
        try await Self.withTokens(20) { _, _, session in
            let image = try Self.fixture(Self.sunset)
            let question = "What does this sunset foretell for my journey?"

            let price = try await session.price(.picture(question, image: image))
            let before = try await Self.serverWallet(session)
            let reply = try #require(try await session.ask(question, about: image))
            #expect(reply.text.hasPrefix("I see a 1200×600 JPEG."), "\(reply.text)")
            #expect(Self.imageTokens(1200, 600) == 1105, "3 × 2 tiles")
            try await Self.expectCharged(reply, price: price, imageTokens: 1105, before: before, session)
        }
    }

    @Test("A clip's three frames are held and charged as three images: more than a question about one of them")
    func videoFrames() async throws {
        try await Self.withTokens(40) { _, _, session in
            let frames = try Self.frames.map(Self.fixture)
            let question = "Where is the ball going?"
            let each = Self.imageTokens(320, 240)
            #expect(each == 255, "one tile")

            let onePrice = try await session.price(.picture(question, image: frames[0]))
            var before = try await Self.serverWallet(session)
            let one = try #require(try await session.ask(question, about: frames[0]))
            let oneCharge = try await Self.expectCharged(one, price: onePrice, imageTokens: each, before: before, session)

            let price = try await session.price(.video(question, frames: frames))
            #expect(price > onePrice)
            before = try await Self.serverWallet(session)
            let clip = try #require(try await session.ask(question, aboutVideoFrames: frames))
            #expect(clip.text.hasPrefix("I see a 320×240 JPEG. I see a 320×240 JPEG. I see a 320×240 JPEG."), "three frames seen: \(clip.text)")
            let charge = try await Self.expectCharged(clip, price: price, imageTokens: 3 * each, before: before, session)
            #expect(charge.promptTokens - oneCharge.promptTokens >= 2 * each, "two more images' tokens")
            #expect(charge.charged > oneCharge.charged, "\(charge.charged) tokens for three frames, \(oneCharge.charged) for one")
        }
    }

    @Test("A wallet one token short of the price: Ask is disabled, the server refuses 402 before calling the model, nothing is charged and the app says why; one token more and it is asked")
    func refusedWhenTheWalletCannotHoldIt() async throws {
        try await Self.withTokens(0) { server, model, session in
            let photo = try Self.fixture(Self.face)
            let price = try await session.price(.faceReading(photo: photo))
            #expect(!session.canAskAboutPicture, "an empty wallet")
            try await Self.grant(Int(price) - 1, server, session, available: price - 1)
            #expect(!session.canAskAboutPicture, "one token short")

            // A stale screen (another device spent the tokens) asks anyway: the server is the judge.
            let entries = try await Self.newestEntries(session.client, 1)
            let asked = try await model.stats().completions
            #expect(try await session.faceReading(photo: photo) == nil)
            #expect(session.notice == "This question costs up to \(price) tokens and you have \(price - 1): buy tokens to ask it.")
            #expect(session.pictureAnswer == nil && session.wallet?.available == price - 1 && session.wallet?.held == 0)
            #expect(try await model.stats().completions == asked, "the model was not called")
            #expect(try await Self.newestEntries(session.client, 1) == entries, "nothing held nor charged")
            let wallet = try await Self.serverWallet(session)
            #expect(wallet.balance == price - 1 && wallet.held == 0)

            try await Self.grant(1, server, session, available: price)
            #expect(session.canAskAboutPicture, "exactly the price")
            let before = try await Self.serverWallet(session)
            let reply = try #require(try await session.faceReading(photo: photo))
            #expect(session.notice == nil && session.pictureAnswer == reply.text)
            try await Self.expectCharged(reply, price: price, imageTokens: 425, before: before, session)
        }
    }

    @Test("Premium's readings are unlimited: a face reading costs nothing at a wallet of 0, and the ledger says what it would have cost")
    func premiumFaceReadingIsFree() async throws {
        try await Self.withTokens(0) { _, _, session in
            try await session.subscribe()
            #expect(session.isPremium && session.wallet?.balance == 0)
            let photo = try Self.fixture(Self.face)
            #expect(try await session.price(.faceReading(photo: photo)) == 0)
            #expect(session.canAskAboutPicture, "free under premium")

            let reply = try #require(try await session.faceReading(photo: photo))
            #expect(reply.text.hasPrefix("I see a 480×640 JPEG."))
            let charge = try #require(reply.charge)
            #expect(charge.charged == 0 && charge.held == 0 && charge.promptTokens > 425)
            let model = try await session.client.ai.model(named: OracleSession.visionModel)
            let cost = model.cost(promptTokens: charge.promptTokens, completionTokens: charge.completionTokens)
            let capture = try #require(try await Self.newestEntries(session.client, 1).first)
            #expect(capture.kind == "capture" && capture.amount == 0)
            #expect(capture.reason?.hasSuffix("(premium: would cost \(cost))") == true, "\(capture.reason ?? "")")
            #expect(try await Self.serverWallet(session).balance == 0)
        }
    }
}
