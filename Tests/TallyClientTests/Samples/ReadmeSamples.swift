import Foundation
import TallyClient

/// README.md's Swift samples, verbatim, compiled (``SamplesAreCompiledTests`` checks they match). What a
/// sample leaves to the app (its views, its paywall, its model call) is a stub here.
enum ReadmeSamples {
    struct Message { var id: String }
    struct Answer { var tokensUsed: Int64 }
    static func show(_ wallet: Wallet?, stale: Bool) {}
    static func showPaywall(available: Int64?) {}
    static func askModel(_ prompt: String) async throws -> Answer { Answer(tokensUsed: 12) }
    static func unlockEverything() {}

    #if canImport(Security)
    /// "The client SDK": the configuration on Apple platforms (the keychain).
    static func configure(cachesDirectory: String) throws -> Client {
        let configuration = ClientConfiguration(
            baseURL: URL(string: "https://api.example.com")!,
            secureStore: KeychainSecureStore(service: "com.example.app.tally"),       // FileSecureStore on Linux
            cacheStore: try SQLiteCacheStore(path: cachesDirectory + "/tally.sqlite")) // last known values across launches
        let tally = Client(configuration: configuration)
        return tally
    }

    /// "The client SDK": an app and its extensions sharing the session.
    static func shared(apiURL: URL) throws -> Client {
        let store = try KeychainSecureStore(appGroup: "group.com.example.astro")   // the same line in the app and the widget
        let tally = Client(configuration: ClientConfiguration(baseURL: apiURL, secureStore: store))
        return tally
    }
    #endif

    /// "The client SDK": sign in, first paint, observe, spend.
    static func use(tally: Client, message: Message) async throws {
        if try await tally.restore() == nil { try await tally.signInAsGuest() }   // one guest account per installation
        let balance = tally.value(tally.walletQuery)?.available                    // synchronous, for first paint

        Task { for await state in tally.observe(tally.walletQuery) { show(state.value, stale: state.isStale) } }

        do {
            // The deduction shows at once; the server's wallet and quotas replace it; retries never charge twice.
            // An intent is any string (a message id, the question asked), scoped to the action: one charge per both.
            try await tally.perform("ai.query", intent: message.id)
        } catch let error as ClientError where error.code == .insufficientTokens {
            showPaywall(available: error.wallet?.available)   // the optimistic deduction is already rolled back
        }
        _ = balance
    }

    /// "The client SDK": holds, history, premium, profile.
    static func accountCalls(tally: Client, prompt: String) async throws -> [LedgerEntry] {
        var history: [LedgerEntry] = []
        let hold = try await tally.createHold(50)                        // shown held at once
        let answer = try await askModel(prompt)
        try await tally.capture(hold, amount: answer.tokensUsed)         // the rest returns to the balance

        for try await page in tally.ledgerPages(pageSize: 20) { history += page }   // newest first, cursor kept for you
        if try await tally.premiumStatus().isActive { unlockEverything() }
        try await tally.updateProfile(language: "hi")                    // and `timezone:` when the user picks one
        return history
    }

    struct HabitLog: Codable, Sendable { var date: String; var habit: String; var done: Bool }
    static func showMonth(_ logs: [SyncedDocument<HabitLog>]) {}
    static func showBadge(pending: Int, offline: Bool) {}
    static func showRolledBack(_ event: SyncEvent) {}

    /// "Synced collections in the app": configure, write, observe a month, the badge and the rollbacks.
    static func syncedCollections(apiURL: URL, store: any SecureStore) async throws {
        var configuration = ClientConfiguration(baseURL: apiURL, secureStore: store)
        configuration.collections = [SyncedCollectionSpec("habit_logs", rangeKey: "date")]   // as the server declares it
        let tally = Client(configuration: configuration)
        if try await tally.restore() == nil { try await tally.signInAsGuest() }

        let logs = tally.collection("habit_logs", of: HabitLog.self)
        try logs.put(id: "2026-11-24-run", HabitLog(date: "2026-11-24", habit: "run", done: true))   // on the device at once
        try logs.patch(id: "2026-11-24-run", HabitLog(date: "2026-11-24", habit: "run", done: false)) // sends only `done`
        Task { for await month in logs.observe(from: "2026-11-01", to: "2026-12-01") { showMonth(month) } }   // from the device
        Task { for await status in tally.syncStatusChanges { showBadge(pending: status.pendingMutations, offline: status.isOffline) } }
        Task { for await event in tally.syncEvents { showRolledBack(event) } }   // a conflict or a 402: already rolled back
    }
}
