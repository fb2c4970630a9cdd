import ExampleSupport
import Foundation
import HabitTrackerCore
import TallyClient

// The habit tracker from the command line: `habit-tracker demo` plays a week of the app against a real
// `tally serve` it starts (TALLY_BIN), printing what the screen shows; `habit-tracker widget-log --server URL
// --home DIR --habit ID --date yyyy-mm-dd` is the widget's process, which logs a day into the app's shared
// container and exits.

func option(_ name: String) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: "--\(name)"), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

@MainActor
func screen(_ board: HabitBoard, month: String, title: String) throws {
    print("── \(title) ── [\(board.badge)]")
    for habit in board.habits {
        let done = Set(try board.doneDays(habit.id, month: month).map { String($0.suffix(2)) })
        let row = (1...14).map { done.contains(String(format: "%02d", $0)) ? "●" : "·" }.joined(separator: " ")
        print("  \(habit.name.padding(toLength: 9, withPad: " ", startingAt: 0)) \(row)")
    }
}

@MainActor
func waitUntilSaved(_ board: HabitBoard) async throws {
    for await status in board.client.syncStatusChanges where status.pendingMutations == 0 && !status.isSyncing && !status.isOffline {
        try board.reload()
        return
    }
}

@MainActor
func demo() async throws {
    let home = FileManager.default.temporaryDirectory.appendingPathComponent("habit-tracker-\(UUID().uuidString.prefix(8))")
    defer { try? FileManager.default.removeItem(at: home) }
    let config = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../tally.yaml").standardized
    let data = home.appendingPathComponent("server")
    var server = try await TallyServer(config: config, dataDirectory: data)
    print("tally serve on \(server.baseURL)")
    let client = try HabitTrackerSetup.client(server: server.baseURL, home: home.appendingPathComponent("app"))
    try await client.signInAsGuest()
    let board = HabitBoard(client: client)
    let meditate = try board.addHabit("Meditate")
    let run = try board.addHabit("Run")
    for day in 1...5 { try board.mark(meditate.id, on: "2027-01-0\(day)", done: true) }
    try board.mark(meditate.id, on: "2027-01-03", done: true)  // a double tap: asks what is shown, writes nothing
    try screen(board, month: "2027-01", title: "five days of meditation, shown at once")
    try await waitUntilSaved(board)
    try screen(board, month: "2027-01", title: "synced")

    try await server.stop()
    for day in 1...7 { try board.mark(run.id, on: "2027-01-0\(day)", done: true) }
    try screen(board, month: "2027-01", title: "a week of runs with the server down")

    let widget = try ChildProcess(
        CommandLine.arguments[0],
        ["widget-log", "--server", server.baseURL.absoluteString, "--home", home.appendingPathComponent("app").path, "--habit", meditate.id,
         "--date", "2027-01-10"],
        output: home.appendingPathComponent("widget.out"))
    _ = try await widget.wait()
    print("the widget logged Meditate on 2027-01-10 and exited")
    try board.appDidBecomeActive()
    try screen(board, month: "2027-01", title: "back in the app: the widget's log, from the shared file")

    server = try await TallyServer(config: config, dataDirectory: data, port: server.port)
    board.client.appDidBecomeActive()
    try await waitUntilSaved(board)
    try screen(board, month: "2027-01", title: "the server is back: everything synced once")
    try await server.stop()
}

func widgetLog() async throws {
    guard let server = option("server").flatMap(URL.init(string:)), let home = option("home"), let habit = option("habit"),
        let date = option("date")
    else { throw ExampleError("usage: habit-tracker widget-log --server URL --home DIR --habit ID --date yyyy-mm-dd") }
    let client = try HabitTrackerSetup.client(server: server, home: URL(fileURLWithPath: home))
    guard try await client.restore() != nil else { throw ExampleError("the app has not signed in yet") }
    try await MainActor.run { try HabitBoard(client: client).mark(habit, on: date, done: true) }
}

do {
    switch CommandLine.arguments.dropFirst().first {
    case "widget-log": try await widgetLog()
    case "demo", nil: try await demo()
    case let other?: throw ExampleError("unknown command \(other): demo | widget-log")
    }
} catch {
    FileHandle.standardError.write(Data("habit-tracker: \(error)\n".utf8))
    exit(1)
}
