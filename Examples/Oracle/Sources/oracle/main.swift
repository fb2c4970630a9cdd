import ExampleSupport
import Foundation
import OracleCore
import TallyClient

// The oracle from the command line: `oracle` plays a day of the app against a real `tally serve` and a real
// `tally dev-appstore` (the local App Store) it starts (TALLY_BIN), printing what the screen shows: three free
// readings, a refusal, 100 tokens bought and shown at once, a metered chat, Apple's refund arriving live, a
// subscription's unlimited readings, and a reinstall that signs in and finds the whole history.

@MainActor
func screen(_ session: OracleSession, _ title: String) {
    let wallet = session.wallet.map { "\($0.available) tokens" } ?? "…"
    let readings = session.isPremium ? "premium: unlimited readings" : "free readings left: \(session.freeReadingsLeft.map(String.init) ?? "…")"
    print("── \(title) ── [\(wallet), \(readings)]")
    for exchange in session.history { print("  you: \(exchange.question)\n  oracle: \(exchange.answer)") }
    if let notice = session.notice { print("  ! \(notice)") }
}

@MainActor
func synced(_ client: Client) async {
    for await status in client.syncStatusChanges where status.pendingMutations == 0 && !status.isSyncing && status.lastSyncedAt != nil { return }
}

@MainActor
func main() async throws {
    let home = FileManager.default.temporaryDirectory.appendingPathComponent("oracle-\(UUID().uuidString.prefix(8))")
    defer { try? FileManager.default.removeItem(at: home) }
    let config = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../tally.yaml").standardized
    let (server, appStore) = try await DevAppStore.startWithServer(config: config, directory: home, subscriptions: [OracleProduct.premium])
    print("tally serve on \(server.baseURL), tally dev-appstore on \(appStore.baseURL)")
    let session = OracleSession(
        client: try OracleSetup.client(server: server.baseURL, home: home.appendingPathComponent("phone")),
        storefront: DevAppStoreStorefront(url: appStore.baseURL))
    try await session.start()
    let follower = Task { await session.follow() }
    defer { follower.cancel() }
    for _ in 0..<4 {
        if let reading = try await session.drawReading() { print("  reading: \(reading)") }
    }
    screen(session, "a guest's three free readings, then a refusal")

    let tokens = try await session.buyTokens()
    screen(session, "100 tokens bought from the App Store: shown as the purchase returns")
    if let reading = try await session.drawReading() { print("  reading: \(reading)") }
    screen(session, "a reading for 5 tokens")

    try session.ask("Will I find a new job?")
    try session.ask("Should I call my sister?")
    await synced(session.client)
    screen(session, "two questions, 1 token each")

    try await appStore.waitUntilDelivered(try await appStore.refund(tokens.purchase.transactionId))
    for _ in 0..<500 where session.wallet?.available != -7 { try await Task.sleep(for: .milliseconds(10)) }
    _ = try await session.drawReading()
    screen(session, "Apple refunded the 100 tokens: the server's event shows the debt, a reading is refused")

    try await session.subscribe()
    for _ in 0..<3 {
        if let reading = try await session.drawReading() { print("  reading: \(reading)") }
    }
    screen(session, "subscribed: readings are unlimited and free")

    let email = "oracle-\(UUID().uuidString.prefix(6).lowercased())@example.com"
    try await session.keepAccount(email: email, password: "moon and stars")
    let reinstalled = OracleSession(client: try OracleSetup.client(server: server.baseURL, home: home.appendingPathComponent("new-phone")))
    _ = try await reinstalled.client.signIn(email: email, password: "moon and stars")
    await synced(reinstalled.client)
    try reinstalled.reload()
    screen(reinstalled, "reinstalled and signed in: the history is back")
    try await appStore.stop()
    try await server.stop()
}

do {
    try await main()
} catch {
    FileHandle.standardError.write(Data("oracle: \(error)\n".utf8))
    exit(1)
}
