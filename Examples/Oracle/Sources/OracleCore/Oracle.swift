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

/// A reading drawn, a document of `readings` (ranged by `drawnAt`; free to store: the `reading` action was charged
/// when it was drawn), so the user's past readings follow the account to a new phone.
public struct Reading: Codable, Sendable, Hashable {
    /// When it was drawn (ISO 8601, UTC): the readings' order.
    public var drawnAt: String
    /// The card and what it says.
    public var card: String

    /// Creates a reading.
    public init(drawnAt: String, card: String) {
        self.drawnAt = drawnAt
        self.card = card
    }
}

/// How the app sets up its Tally client.
public enum OracleSetup {
    /// The client for `server` with its session in plain files under `home` (`FileSecureStore`) and its documents
    /// beside them: for the command line and the tests, which play several phones, each a temporary directory. The
    /// app on an Apple platform uses ``client(server:service:)``, which keeps the session in the Keychain.
    public static func client(server: URL, home: URL) throws -> Client {
        client(
            server: server, secureStore: try FileSecureStore(directory: home.appendingPathComponent("session")),
            documents: home.appendingPathComponent("documents"))
    }

    /// The client for `server` with the oracle's collections, its session in `secureStore` and its documents in
    /// `documents` (nil: the SDK's default, Application Support/Tally).
    static func client(server: URL, secureStore: any SecureStore, documents: URL?) -> Client {
        var configuration = ClientConfiguration(baseURL: server, secureStore: secureStore)
        configuration.collections = [SyncedCollectionSpec("chat_messages", rangeKey: "sentAt"), SyncedCollectionSpec("readings", rangeKey: "drawnAt")]
        configuration.documentsDirectory = documents
        return Client(configuration: configuration)
    }
}

#if canImport(Security)
extension OracleSetup {
    /// The app's client for `server` on an Apple platform: the session — the refresh token, which the server rotates at
    /// every refresh, and the installation secret that names this phone's guest — in the Keychain
    /// (`KeychainSecureStore(service:)`), never in a file. Its items are this device's only (accessible after first
    /// unlock, `ThisDeviceOnly`), so they are in no backup: a backup restored onto another phone does not give two
    /// phones one rotating refresh token (the first to refresh would sign the other out) or one guest. The new phone
    /// starts as a guest of its own, and Sign in with Apple brings the account back (``OracleSession``'s
    /// `signInWithApple(identityToken:nonce:authorizationCode:)` merges what that guest did).
    ///
    /// The store is the app's alone (`KeychainSecureStore(service:)`): the oracle has no widget or other extension to
    /// share the session with. An app that has one creates its store with `KeychainSecureStore(appGroup:)` in the app and
    /// in each extension, as HabitTracker does for its widget (`HabitTrackerSetup.client(server:appGroup:)`). The
    /// documents are in the SDK's default place, Application Support/Tally.
    public static func client(server: URL, service: String = "com.example.oracle") -> Client {
        client(server: server, secureStore: KeychainSecureStore(service: service), documents: nil)
    }
}
#endif

/// The oracle's screen state: the wallet, premium and today's free readings, the chat history (from the device),
/// and a notice when the server refused something. Readings are metered actions; chat exchanges are synced
/// documents the server charges as it stores them, so a message sent offline is charged once when it arrives.
/// Questions about pictures — a face reading from a photo, a picture, a clip's frames — go to the AI gateway's
/// vision model, priced before they are asked and charged what the model used (`Pictures.swift`).
/// Tokens and premium are bought from a ``Storefront`` and redeemed on the server, which answers with the wallet
/// and premium after the purchase; what the App Store does later (a refund, a subscription's end) reaches the
/// server as a notification, and the screen through the server's events.
@MainActor
@Observable
public final class OracleSession {
    /// The wallet as last known (the server's events keep it current).
    public internal(set) var wallet: Wallet?
    /// Free readings left today, when known; nil under premium (unlimited).
    public private(set) var freeReadingsLeft: Int?
    /// When premium ends, as the server last said; nil: no premium.
    public private(set) var premiumUntil: Date?
    /// The chat, oldest first.
    public private(set) var history: [ChatExchange] = []
    /// The readings drawn, oldest first.
    public private(set) var readings: [Reading] = []
    /// What the app tells the user about a refusal ("out of tokens…"), if anything.
    public internal(set) var notice: String?
    /// The most the question about a picture on screen can cost, in tokens, once priced (``price(_:)``): the screen
    /// says "up to N tokens" and enables Ask while the wallet can hold it (``canAskAboutPicture``). 0: free under
    /// premium.
    public internal(set) var pictureCost: Int64?
    /// The oracle's last answer about a picture: a face reading, a picture's or a clip's.
    public internal(set) var pictureAnswer: String?
    /// What went wrong with the user's last action (``attempt(_:)``: a purchase the App Store or the server refused, a
    /// restore, no connection), as the screen's alert says it; nil when nothing did. Set to nil when dismissed.
    public var failure: String?

    /// Whether the screen shows ``failure``: the alert's binding (setting false dismisses it).
    public var isShowingFailure: Bool {
        get { failure != nil }
        set { if !newValue { failure = nil } }
    }

    /// Whether premium runs now: readings are free and unlimited.
    public var isPremium: Bool { premiumUntil.map { $0 > Date() } ?? false }

    /// Asked when the Apple ID signing in already has an account and this phone's guest has progress of its own
    /// (`progress`: its tokens, documents, purchases): whether to bring it into the account. The screen asks "This
    /// account already exists — bring what you did on this phone into it?"; without a screen, yes.
    @ObservationIgnored public var confirmMerge: @MainActor (GuestProgress) async -> Bool = { _ in true }

    @ObservationIgnored public let client: Client
    @ObservationIgnored private let storefront: (any Storefront)?
    @ObservationIgnored private let chat: SyncedCollection<ChatExchange>
    @ObservationIgnored private let drawn: SyncedCollection<Reading>
    /// Readings drawn on this device (premium ones move neither the quota nor the wallet: they still differ).
    @ObservationIgnored private var draws: Int64 = 0

    /// The session of `client`'s user, buying from `storefront` (nil: the app sells nothing).
    public init(client: Client, storefront: (any Storefront)? = nil) {
        self.client = client
        self.storefront = storefront
        chat = client.collection("chat_messages", of: ChatExchange.self)
        drawn = client.collection("readings", of: Reading.self)
    }

    /// Restores the stored session, or starts as a guest; reads whether the user has premium.
    public func start() async throws {
        if try await client.restore() == nil { try await client.signInAsGuest() }
        premiumUntil = try await client.premiumStatus().until
        try reload()
    }

    /// Reads the history, the readings and the cached wallet, quotas and premium from the device.
    public func reload() throws {
        history = try chat.documents().map(\.value)
        readings = try drawn.documents().map(\.value)
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
        async let readingsFollowed: Void = followReadings()
        async let walletFollowed: Void = followWallet()
        async let quotasFollowed: Void = followQuotas()
        async let premiumFollowed: Void = followPremium()
        async let refusalsFollowed: Void = followRefusals()
        _ = await (historyFollowed, readingsFollowed, walletFollowed, quotasFollowed, premiumFollowed, refusalsFollowed)
    }

    private func followHistory() async {
        for await documents in chat.observe() { history = documents.map(\.value) }
    }

    private func followReadings() async {
        for await documents in drawn.observe() { readings = documents.map(\.value) }
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
    /// when none of these. A reading drawn is kept in ``readings`` (and synced).
    public func drawReading(at date: Date = Date()) async throws -> String? {
        do {
            let result = try await client.perform("reading")
            wallet = result.wallet
            show(result.quotas)
            notice = nil
            draws += 1
            let card = Self.reading(for: Int64(result.quotas.first?.used ?? 0) + result.wallet.version + draws)
            try drawn.put(id: UUID().uuidString.lowercased(), Reading(drawnAt: Self.timestamp(date), card: card))
            readings = try drawn.documents().map(\.value)
            return card
        } catch let error as ClientError where error.code == .insufficientTokens {
            wallet = error.wallet ?? wallet
            notice = "Your three free readings are used for today: buy tokens for more."
            return nil
        }
    }

    /// Asks the oracle: the exchange shows in the history at once and is stored (and charged 1 token) on the
    /// server when it arrives; a refusal rolls it back and sets ``notice``.
    public func ask(_ question: String, at date: Date = Date()) throws {
        let exchange = ChatExchange(sentAt: Self.timestamp(date), question: question, answer: Self.answer(to: question))
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
        show(answer)
        return answer
    }

    /// Shows a purchase as the server answered it, at once: the wallet, premium, and the free readings premium makes
    /// unlimited. Whichever store it came from (a ``Storefront`` here, StoreKit on iOS).
    func show(_ answer: PurchaseResponse) {
        wallet = answer.wallet
        premiumUntil = answer.premiumUntil
        if isPremium { freeReadingsLeft = nil }
        notice = nil
    }

    /// Shows what "Restore Purchases" brought back (on iOS from `client.purchases.restore()`): premium as the server
    /// has it after the restore, how many purchases it has for this account, and the entitlements it would not give
    /// this account (their errors: `sign_in_required`, `purchase_claimed`, …), which the user is told about.
    public func showRestored(premiumUntil: Date?, purchases: Int, refusals: [ClientError]) {
        self.premiumUntil = premiumUntil
        if isPremium { freeReadingsLeft = nil }
        if let refusal = refusals.first {
            failure = Self.message(for: refusal)
        } else {
            notice = purchases == 0 ? "Nothing to restore: this Apple Account has no subscription running." : nil
        }
    }

    /// Shows a transaction the server refused for good (the observer's `onRefused`: its signature, app or environment),
    /// which StoreKit has finished: the user was charged and nothing was credited, a case for the developer's support.
    public func showRefused(productId: String, error: ClientError) {
        failure = "Your purchase of \(productId) could not be credited (\(error.serverCode?.rawValue ?? error.code.description)): contact support."
    }

    /// Runs one of the user's actions (a button: a purchase, a restore, a reading), showing what goes wrong in
    /// ``failure`` instead of dropping it; the task it runs in, which the caller may wait for.
    @discardableResult
    public func attempt(_ action: @escaping @MainActor () async throws -> Void) -> Task<Void, Never> {
        Task {
            do { try await action() } catch { report(error) }
        }
    }

    /// Shows `error` in ``failure`` (nothing for a cancellation: the screen went away).
    public func report(_ error: any Error) {
        guard !(error is CancellationError) else { return }
        failure = Self.message(for: error)
    }

    /// What the screen says about `error`: a sentence for the SDK's errors the user can act on, the store's own words
    /// (StoreKit's errors are `LocalizedError`s), or the error's description.
    public static func message(for error: any Error) -> String {
        if let error = error as? ClientError {
            switch error.code {
            case .offline, .timedOut: return "The oracle cannot be reached: check your connection and try again."
            case .unauthorized: return "You are signed out: sign in again."
            case .insufficientTokens, .quotaExhausted: return "Not enough tokens: buy tokens first."
            case .rateLimited: return "Too many requests at once: try again in a moment."
            default: break
            }
            switch error.serverCode {
            case .some(.purchaseClaimed): return "This purchase belongs to another account: sign in to that account to use it."
            case .some(.signInRequired): return "This subscription belongs to an account: sign in to it, then restore purchases again."
            case .some(.unknownProduct): return "This product is not on sale yet: try again later."
            default: return error.message ?? error.description
            }
        }
        if let error = error as? any LocalizedError, let description = error.errorDescription { return description }
        return String(describing: error)
    }

    /// Signs in with Apple: `identityToken` and `authorizationCode` are the credential Apple gave for a request whose
    /// nonce was `nonce.hashed` (`ASAuthorizationAppleIDRequest.nonce`). A guest whose Apple ID is new keeps everything
    /// as that account (in place). An Apple ID that already has an account — a reinstall, a second phone — makes the
    /// server answer `account_exists` with what this guest would bring; the user decides (``confirmMerge``): yes
    /// carries the guest's tokens, readings, chat and purchases into the account (one transaction on the server,
    /// unsynced changes included) and signs in to it; no leaves this phone's guest as it was (nil). Then the screen
    /// shows the account's wallet, free readings, premium, history and readings.
    @discardableResult
    public func signInWithApple(identityToken: String, nonce: AppleSignInNonce, authorizationCode: String? = nil) async throws -> SignInResult? {
        let result: SignInResult
        do {
            result = try await client.signInWithApple(identityToken: identityToken, nonce: nonce, authorizationCode: authorizationCode)
        } catch let error as ClientError where error.code == .accountExists {
            guard let progress = error.guest, await confirmMerge(progress) else { return nil }
            result = try await client.signInWithApple(
                identityToken: identityToken, nonce: nonce, authorizationCode: authorizationCode, merge: true)
        }
        try await refresh()
        return result
    }

    /// Reads the signed-in user's wallet, free readings and premium from the server, and the documents from the device.
    private func refresh() async throws {
        wallet = try await client.fetch(client.walletQuery, forceRefresh: true)
        show(try await client.fetch(client.quotasQuery, forceRefresh: true).items)
        premiumUntil = try await client.premiumStatus().until
        notice = nil
        try reload()
    }

    /// Keeps the guest's account under an email and password, so a reinstall can sign in to it.
    public func keepAccount(email: String, password: String) async throws {
        _ = try await client.link(email: email, password: password)
    }

    /// `date` as the documents' range keys write it (ISO 8601 with milliseconds, UTC).
    static func timestamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
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
