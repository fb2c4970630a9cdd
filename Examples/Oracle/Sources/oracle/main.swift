import ExampleSupport
import Foundation
import OracleCore
import TallyClient

// The oracle from the command line: `oracle` plays a day of the app against a real `tally serve` it starts
// (TALLY_BIN), printing what the screen shows: three free readings, a refusal, a purchase arriving live, a
// metered chat, and a reinstall that signs in and finds the whole history.

@MainActor
func screen(_ session: OracleSession, _ title: String) {
    let wallet = session.wallet.map { "\($0.available) tokens" } ?? "…"
    print("── \(title) ── [\(wallet), free readings left: \(session.freeReadingsLeft.map(String.init) ?? "…")]")
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
    let server = try await TallyServer(config: config, dataDirectory: home.appendingPathComponent("server"))
    print("tally serve on \(server.baseURL)")
    let session = OracleSession(client: try OracleSetup.client(server: server.baseURL, home: home.appendingPathComponent("phone")))
    try await session.start()
    let follower = Task { await session.follow() }
    defer { follower.cancel() }
    for _ in 0..<4 {
        if let reading = try await session.drawReading() { print("  reading: \(reading)") }
    }
    screen(session, "a guest's three free readings, then a refusal")

    let userId = try require(await session.client.user)?.userId
    try await server.grant(20, to: userId ?? "")  // a purchase, recorded by the app's backend
    for _ in 0..<200 where session.wallet?.available != 20 { try await Task.sleep(for: .milliseconds(10)) }
    screen(session, "20 tokens bought: the wallet follows the server's event")

    try session.ask("Will I find a new job?")
    try session.ask("Should I call my sister?")
    await synced(session.client)
    screen(session, "two questions, 1 token each")

    let email = "oracle-\(UUID().uuidString.prefix(6).lowercased())@example.com"
    try await session.keepAccount(email: email, password: "moon and stars")
    let reinstalled = OracleSession(client: try OracleSetup.client(server: server.baseURL, home: home.appendingPathComponent("new-phone")))
    _ = try await reinstalled.client.signIn(email: email, password: "moon and stars")
    await synced(reinstalled.client)
    try reinstalled.reload()
    screen(reinstalled, "reinstalled and signed in: the history is back")
    try await server.stop()
}

func require<T>(_ value: T?) throws -> T {
    guard let value else { throw ExampleError("missing value") }
    return value
}

do {
    try await main()
} catch {
    FileHandle.standardError.write(Data("oracle: \(error)\n".utf8))
    exit(1)
}
