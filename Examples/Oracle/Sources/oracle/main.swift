import ExampleSupport
import Foundation
import OracleCore
import TallyClient

// The oracle from the command line: `oracle` plays a day of the app against a real `tally serve`, a real
// `tally-dev dev-appstore` (the local App Store) and a real `tally-dev dev-llm` (the local model) it starts (TALLY_BIN, TALLY_DEV_BIN),
// printing what the screen shows: three free readings, a refusal, 100 tokens bought and shown at once, a metered
// chat, a face reading from a photo and a question about a clip's three frames (each priced before it is asked),
// Apple's refund arriving live, a subscription's unlimited readings, Sign in with Apple, and a reinstall that starts
// as a guest, buys tokens, draws a reading, then signs in with Apple and brings them into the account, where the
// whole history is.

@MainActor
func screen(_ session: OracleSession, _ title: String) {
    let wallet = session.wallet.map { "\($0.available) tokens" } ?? "…"
    let readings = session.isPremium ? "premium: unlimited readings" : "free readings left: \(session.freeReadingsLeft.map(String.init) ?? "…")"
    print("── \(title) ── [\(wallet), \(readings), \(session.readings.count) readings kept]")
    for exchange in session.history { print("  you: \(exchange.question)\n  oracle: \(exchange.answer)") }
    if let notice = session.notice { print("  ! \(notice)") }
}

@MainActor
func synced(_ client: Client) async {
    for await status in client.syncStatusChanges where status.pendingMutations == 0 && !status.isSyncing && status.lastSyncedAt != nil { return }
}

/// Signs `session` in with Apple as Apple user `sub` (the stand-in mints what `ASAuthorizationAppleIDCredential` holds).
@MainActor
func signInWithApple(_ session: OracleSession, sub: String, _ appStore: DevAppStore) async throws {
    let nonce = AppleSignInNonce()
    let credential = try await appStore.identityToken(sub: sub, nonce: nonce.raw)
    try await session.signInWithApple(identityToken: credential.identityToken, nonce: nonce, authorizationCode: credential.authorizationCode)
}

@MainActor
func main() async throws {
    let home = FileManager.default.temporaryDirectory.appendingPathComponent("oracle-\(UUID().uuidString.prefix(8))")
    defer { try? FileManager.default.removeItem(at: home) }
    let config = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../tally.yaml").standardized
    // The photo and the clip's frames the user picks: the tests' fixtures.
    let fixtures = config.deletingLastPathComponent().appendingPathComponent("Tests/OracleTests/Fixtures")
    let model = try await DevLLM(directory: home, apiKeyEnv: "ORACLE_LLM_KEY")
    let (server, appStore) = try await DevAppStore.startWithServer(
        config: config, directory: home, subscriptions: [OracleProduct.premium], devLLM: model)
    print("tally serve on \(server.baseURL), tally-dev dev-appstore on \(appStore.baseURL), tally-dev dev-llm on \(model.baseURL)")
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

    let photo = try Data(contentsOf: fixtures.appendingPathComponent("face-480x640.jpg"))
    let facePrice = try await session.price(.faceReading(photo: photo))
    print("  face reading of a 480×640 photo: up to \(facePrice) tokens")
    if let reply = try await session.faceReading(photo: photo) { print("  oracle: \(reply.text) [\(reply.charge?.charged ?? 0) tokens]") }
    let frames = try (1...3).map { try Data(contentsOf: fixtures.appendingPathComponent("ball-frame\($0)-320x240.jpg")) }
    let clipPrice = try await session.price(.video("Where is the ball going?", frames: frames))
    print("  a question about a clip's three frames: up to \(clipPrice) tokens")
    if let reply = try await session.ask("Where is the ball going?", aboutVideoFrames: frames) {
        print("  oracle: \(reply.text) [\(reply.charge?.charged ?? 0) tokens]")
    }
    screen(session, "a face reading and a clip's question: priced first, charged what the model used")

    let debt = (session.wallet?.available ?? 0) - 100
    try await appStore.waitUntilDelivered(try await appStore.refund(tokens.purchase.transactionId))
    for _ in 0..<500 where session.wallet?.available != debt { try await Task.sleep(for: .milliseconds(10)) }
    _ = try await session.drawReading()
    screen(session, "Apple refunded the 100 tokens: the server's event shows the debt, a reading is refused")

    try await session.subscribe()
    for _ in 0..<3 {
        if let reading = try await session.drawReading() { print("  reading: \(reading)") }
    }
    screen(session, "subscribed: readings are unlimited and free")

    await synced(session.client)
    let sub = "001234.\(UUID().uuidString.prefix(8).lowercased())"
    try await signInWithApple(session, sub: sub, appStore)
    screen(session, "signed in with Apple: the guest is that account now, in place")

    let reinstalled = OracleSession(
        client: try OracleSetup.client(server: server.baseURL, home: home.appendingPathComponent("new-phone")),
        storefront: DevAppStoreStorefront(url: appStore.baseURL))
    try await reinstalled.start()
    try await reinstalled.buyTokens()
    if let reading = try await reinstalled.drawReading() { print("  reading: \(reading)") }
    await synced(reinstalled.client)
    screen(reinstalled, "reinstalled: a new guest buys 100 tokens and draws a reading")
    reinstalled.confirmMerge = { progress in
        print("  ? This Apple ID has an account: bring \(progress.balance) tokens, \(progress.documents) documents and \(progress.purchases) purchase into it? yes")
        return true
    }
    try await signInWithApple(reinstalled, sub: sub, appStore)
    for _ in 0..<500 where reinstalled.history.count != session.history.count || reinstalled.readings.count != session.readings.count + 1 {
        try await Task.sleep(for: .milliseconds(10))
        try reinstalled.reload()
    }
    screen(reinstalled, "signed in with Apple and merged: the history, the tokens and the new reading are all there")
    try await appStore.stop()
    try await server.stop()
    try await model.stop()
}

do {
    try await main()
} catch {
    FileHandle.standardError.write(Data("oracle: \(error)\n".utf8))
    exit(1)
}
