import Foundation
import Observation
import TallyClient

/// One exchange of the chat: the user's question and the oracle's answer, a document of `chat_messages`
/// (ranged by `sentAt`; creating one costs the `chat.message` action: 1 token).
public struct ChatExchange: Codable, Sendable, Hashable {
    /// When it was asked (ISO 8601, UTC): the history's order.
    public var sentAt: String
    /// What the user asked.
    public var question: String
    /// What the oracle answered.
    public var answer: String

    /// Creates an exchange.
    public init(sentAt: String, question: String, answer: String) {
        self.sentAt = sentAt
        self.question = question
        self.answer = answer
    }
}

/// How the app sets up its Tally client.
public enum OracleSetup {
    /// The app's client for `server`, its session and documents under `home`.
    public static func client(server: URL, home: URL) throws -> Client {
        var configuration = ClientConfiguration(
            baseURL: server, secureStore: try FileSecureStore(directory: home.appendingPathComponent("session")))
        configuration.collections = [SyncedCollectionSpec("chat_messages", rangeKey: "sentAt")]
        configuration.documentsDirectory = home.appendingPathComponent("documents")
        return Client(configuration: configuration)
    }
}

/// The oracle's screen state: the wallet, premium and today's free readings, the chat history (from the device),
/// and a notice when the server refused something. Readings are metered actions; chat exchanges are synced
/// documents the server charges as it stores them, so a message sent offline is charged once when it arrives.
/// Tokens and premium are bought from a ``Storefront`` and redeemed on the server, which answers with the wallet
/// and premium after the purchase; what the App Store does later (a refund, a subscription's end) reaches the
/// server as a notification, and the screen through the server's events.
@MainActor
@Observable
public final class OracleSession {
    /// The wallet as last known (the server's events keep it current).
    public private(set) var wallet: Wallet?
    /// Free readings left today, when known; nil under premium (unlimited).
    public private(set) var freeReadingsLeft: Int?
    /// When premium ends, as the server last said; nil: no premium.
    public private(set) var premiumUntil: Date?
    /// The chat, oldest first.
    public private(set) var history: [ChatExchange] = []
    /// What the app tells the user about a refusal ("out of tokens…"), if anything.
    public private(set) var notice: String?

    /// Whether premium runs now: readings are free and unlimited.
    public var isPremium: Bool { premiumUntil.map { $0 > Date() } ?? false }

    @ObservationIgnored public let client: Client
    @ObservationIgnored private let storefront: (any Storefront)?
    @ObservationIgnored private let chat: SyncedCollection<ChatExchange>
    /// Readings drawn on this device (premium ones move neither the quota nor the wallet: they still differ).
    @ObservationIgnored private var draws: Int64 = 0

    /// The session of `client`'s user, buying from `storefront` (nil: the app sells nothing).
    public init(client: Client, storefront: (any Storefront)? = nil) {
        self.client = client
        self.storefront = storefront
        chat = client.collection("chat_messages", of: ChatExchange.self)
    }

    /// Restores the stored session, or starts as a guest; reads whether the user has premium.
    public func start() async throws {
        if try await client.restore() == nil { try await client.signInAsGuest() }
        premiumUntil = try await client.premiumStatus().until
        try reload()
    }

    /// Reads the history and the cached wallet, quotas and premium from the device.
    public func reload() throws {
        history = try chat.documents().map(\.value)
        wallet = client.value(client.walletQuery)
        if let quotas = client.value(client.quotasQuery) { show(quotas.items) }
        if let me = client.value(client.meQuery) { premiumUntil = me.premiumUntil }
    }

    private func show(_ quotas: [Quota]) {
        guard let quota = quotas.first(where: { $0.name == "readings" }) else { return }
        freeReadingsLeft = quota.unlimited ? nil : quota.remaining
    }

    /// Follows the history, the wallet, the free readings, premium and refusals until the task is cancelled
    /// (SwiftUI's `.task`).
    public func follow() async {
        async let historyFollowed: Void = followHistory()
        async let walletFollowed: Void = followWallet()
        async let quotasFollowed: Void = followQuotas()
        async let premiumFollowed: Void = followPremium()
        async let refusalsFollowed: Void = followRefusals()
        _ = await (historyFollowed, walletFollowed, quotasFollowed, premiumFollowed, refusalsFollowed)
    }

    private func followHistory() async {
        for await documents in chat.observe() { history = documents.map(\.value) }
    }

    private func followWallet() async {
        for await state in client.observe(client.walletQuery) {
            if let value = state.value, value.available > wallet?.available ?? 0 { notice = nil }  // tokens arrived
            wallet = state.value
        }
    }

    /// The server's events carry the quotas with the wallet: a subscription's end shows the day's free readings again.
    private func followQuotas() async {
        for await state in client.observe(client.quotasQuery) { if let quotas = state.value { show(quotas.items) } }
    }

    /// Premium as the server says, bought or ended (the events update the cached profile).
    private func followPremium() async {
        for await state in client.observe(client.meQuery) { if let me = state.value { premiumUntil = me.premiumUntil } }
    }

    private func followRefusals() async {
        for await event in client.syncEvents {
            if case .rejected(_, _, let error) = event, error.code.rawValue == "insufficient_tokens" {
                notice = "Out of tokens: your last message was not sent."
            }
        }
    }

    /// Draws today's reading: free under premium or while the day's three last, then 5 tokens; nil (and a notice)
    /// when none of these.
    public func drawReading() async throws -> String? {
        do {
            let result = try await client.perform("reading")
            wallet = result.wallet
            show(result.quotas)
            notice = nil
            draws += 1
            return Self.reading(for: Int64(result.quotas.first?.used ?? 0) + result.wallet.version + draws)
        } catch let error as ClientError where error.code == .insufficientTokens {
            wallet = error.wallet ?? wallet
            notice = "Your three free readings are used for today: buy tokens for more."
            return nil
        }
    }

    /// Asks the oracle: the exchange shows in the history at once and is stored (and charged 1 token) on the
    /// server when it arrives; a refusal rolls it back and sets ``notice``.
    public func ask(_ question: String, at date: Date = Date()) throws {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let exchange = ChatExchange(sentAt: formatter.string(from: date), question: question, answer: Self.answer(to: question))
        try chat.put(id: UUID().uuidString.lowercased(), exchange)
        history = try chat.documents().map(\.value)
    }

    /// Buys 100 tokens: charged by the store, redeemed on the server, shown at once from the server's answer (no
    /// second request). The purchase is the answer's (its transaction id, what it gave).
    @discardableResult
    public func buyTokens() async throws -> PurchaseResponse {
        try await buy(OracleProduct.tokens100)
    }

    /// Subscribes to premium (unlimited readings while it runs), shown at once as ``buyTokens()`` shows tokens.
    @discardableResult
    public func subscribe() async throws -> PurchaseResponse {
        try await buy(OracleProduct.premium)
    }

    /// Buys `productId` for this account (the user id is the `appAccountToken`, so Apple's notification credits the
    /// same account whichever reaches the server first) and redeems it.
    private func buy(_ productId: String) async throws -> PurchaseResponse {
        guard let storefront else { throw StorefrontError(message: "this build sells nothing") }
        guard let userId = await client.user?.userId else { throw ClientError(.unauthorized, message: "sign in before buying") }
        let signedTransaction = try await storefront.buy(productId: productId, appAccountToken: UUID(uuidString: userId))
        let answer = try await client.purchases.redeem(signedTransaction: signedTransaction)
        wallet = answer.wallet
        premiumUntil = answer.premiumUntil
        if isPremium { freeReadingsLeft = nil }
        notice = nil
        return answer
    }

    /// Keeps the guest's account under an email and password, so a reinstall can sign in to it.
    public func keepAccount(email: String, password: String) async throws {
        _ = try await client.link(email: email, password: password)
    }

    /// The oracle's answer (a stand-in for the AI gateway of issue 21: deterministic, computed on the device).
    static func answer(to question: String) -> String {
        let answers = [
            "The stars say yes, but not today.", "Patience: the moon is on your side.", "Ask again after the new moon.",
            "A friend holds the answer.", "Trust the first thought you had.",
        ]
        return answers[question.unicodeScalars.reduce(0) { $0 &+ Int($1.value) } % answers.count]
    }

    static func reading(for seed: Int64) -> String {
        ["The Star: hope returns.", "The Tower: change comes fast.", "The Sun: a good day to begin."][Int(seed % 3)]
    }
}
