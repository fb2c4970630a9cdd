import ExampleSupport
import Foundation
import HabitTrackerCore
import TallyClient
import Testing

/// The habit tracker against a real `tally serve` (TALLY_BIN): what seed 003 needed, with no code of its own
/// for caching, retries or selective reloads.
@Suite("Habit tracker", .serialized, .timeLimit(.minutes(2)))
@MainActor
struct HabitTrackerTests {
    static let config = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../tally.yaml").standardized

    /// A fresh home (the App Group container) and server data directory, removed afterwards.
    static func withHome(_ body: @MainActor (URL) async throws -> Void) async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("habit-tests-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: home) }
        try await body(home)
    }

    /// Waits for the board's client to have pushed everything and pulled.
    static func synced(_ client: Client) async {
        for await status in client.syncStatusChanges
        where status.pendingMutations == 0 && !status.isSyncing && !status.isOffline && status.lastSyncedAt != nil { return }
    }

    /// The user's logs as the server holds them (a second device's fresh pull): document id → version.
    static func serverLogs(_ server: TallyServer, home: URL, session: URL) async throws -> [String: SyncedDocument<HabitLog>] {
        let device = home.appendingPathComponent("second-device-\(UUID().uuidString.prefix(4))")
        try FileManager.default.createDirectory(at: device, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: session, to: device.appendingPathComponent("session"))
        let client = try HabitTrackerSetup.client(server: server.baseURL, home: device)
        _ = try await client.restore()
        await synced(client)
        let logs = try client.collection("habit_logs", of: HabitLog.self).documents()
        return Dictionary(uniqueKeysWithValues: logs.map { ($0.id, $0) })
    }

    @Test("A toggle shows at once, before any request; a double tap is one change")
    func instantToggleAndDoubleTap() async throws {
        try await Self.withHome { home in
            let server = try await TallyServer(config: Self.config, dataDirectory: home.appendingPathComponent("server"))
            let client = try HabitTrackerSetup.client(server: server.baseURL, home: home.appendingPathComponent("app"))
            try await client.signInAsGuest()
            let board = HabitBoard(client: client)
            let habit = try board.addHabit("Meditate")
            await Self.synced(client)
            try await server.stop()  // nothing can answer now: what the board shows comes from the device
            try board.mark(habit.id, on: "2027-01-03", done: true)
            #expect(try board.isDone(habit.id, on: "2027-01-03"))
            #expect(try board.doneDays(habit.id, month: "2027-01") == ["2027-01-03"])
            try board.mark(habit.id, on: "2027-01-03", done: true)  // the second tap of a double tap
            #expect(client.syncStatus.pendingMutations == 1, "a double tap queued \(client.syncStatus.pendingMutations) changes")
        }
    }

    @Test("A week of toggles made offline syncs exactly once when the server comes back; the month reads from the device meanwhile")
    func offlineWeek() async throws {
        try await Self.withHome { home in
            let data = home.appendingPathComponent("server")
            var server = try await TallyServer(config: Self.config, dataDirectory: data)
            let client = try HabitTrackerSetup.client(server: server.baseURL, home: home.appendingPathComponent("app"))
            try await client.signInAsGuest()
            let board = HabitBoard(client: client)
            let habit = try board.addHabit("Run")
            await Self.synced(client)
            try await server.stop()
            let week = (1...7).map { "2027-01-0\($0)" }
            for day in week { try board.mark(habit.id, on: day, done: true) }
            try board.mark(habit.id, on: "2027-01-04", done: false)  // changed its mind: a second change to one log
            #expect(try board.doneDays(habit.id, month: "2027-01") == week.filter { $0 != "2027-01-04" })
            #expect(client.syncStatus.pendingMutations == 8)

            server = try await TallyServer(config: Self.config, dataDirectory: data, port: server.port)
            client.appDidBecomeActive()
            await Self.synced(client)
            let logs = try await Self.serverLogs(server, home: home, session: home.appendingPathComponent("app/session"))
            #expect(logs.count == 7)
            // Each change applied once: the habit took version 1, the seven logs 2…8, the change of mind (the 4th) 9.
            #expect(logs.values.map(\.version).sorted() == [2, 3, 4, 6, 7, 8, 9])
            #expect(logs[HabitLog.id(habitId: habit.id, date: "2027-01-04")]?.version == 9)
            #expect(logs[HabitLog.id(habitId: habit.id, date: "2027-01-04")]?.value.done == false)
            #expect(logs.values.filter(\.value.done).count == 6)
            try await server.stop()
        }
    }

    @Test("The widget's process logs a habit into the shared container while the app is in the background; back in front, the app shows it, then pushes it once")
    func widgetLog() async throws {
        try await Self.withHome { home in
            let server = try await TallyServer(config: Self.config, dataDirectory: home.appendingPathComponent("server"))
            let app = home.appendingPathComponent("app")
            let client = try HabitTrackerSetup.client(server: server.baseURL, home: app)
            try await client.signInAsGuest()
            let board = HabitBoard(client: client)
            let habit = try board.addHabit("Read")
            await Self.synced(client)
            board.appDidEnterBackground()  // the user leaves the app (scenePhase .background) and taps the widget
            let driver = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("habit-tracker")
            let widget = try ChildProcess(
                driver.path,
                ["widget-log", "--server", server.baseURL.absoluteString, "--home", app.path, "--habit", habit.id, "--date", "2027-02-14"],
                output: home.appendingPathComponent("widget.out"))
            #expect(try await widget.wait() == 0, "\(widget.errors)")
            try board.appDidBecomeActive()
            #expect(try board.doneDays(habit.id, month: "2027-02") == ["2027-02-14"])
            await Self.synced(client)
            let logs = try await Self.serverLogs(server, home: home, session: app.appendingPathComponent("session"))
            #expect(logs.count == 1 && logs.values.first?.version == 2, "\(logs)")
            try await server.stop()
        }
    }

    @Test("A change the device cannot save is shown (the screen's alert) until dismissed, not dropped")
    func failureIsShown() async throws {
        try await Self.withHome { home in
            let client = try HabitTrackerSetup.client(server: URL(string: "http://127.0.0.1:9")!, home: home)
            let board = HabitBoard(client: client)
            #expect(!board.isShowingFailure)
            board.attempt { try board.mark("a-habit", on: "2027-02-14", done: true) }  // nobody signed in: nowhere to save it
            #expect(board.isShowingFailure && board.failure?.isEmpty == false, "\(board.failure ?? "")")
            board.isShowingFailure = false  // the alert's OK
            #expect(board.failure == nil)
            board.attempt { throw ExampleError("the disk is full") }
            #expect(board.failure == "the disk is full")
        }
    }
}
