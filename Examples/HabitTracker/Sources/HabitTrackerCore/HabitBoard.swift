import Foundation
import Observation
import TallyClient

/// The habit tracker's screen state: the habits, which days are done, and the "saved / syncing / offline"
/// badge. Every change applies to the device at once and syncs in the background (the SDK's outbox), so a
/// toggle never waits for the network and an offline week syncs when the server is back.
@MainActor
@Observable
public final class HabitBoard {
    /// The habits, by name.
    public private(set) var habits: [Habit] = []
    /// The badge: "saved", "syncing (n)" or "offline (n waiting)".
    public private(set) var badge = "saved"
    /// What went wrong with the user's last change (``attempt(_:)``: the device's database refused it), as the screen's
    /// alert says it; nil when nothing did. Set to nil when dismissed.
    public var failure: String?

    /// Whether the screen shows ``failure``: the alert's binding (setting false dismisses it).
    public var isShowingFailure: Bool {
        get { failure != nil }
        set { if !newValue { failure = nil } }
    }

    @ObservationIgnored public let client: Client
    @ObservationIgnored private let habitDocuments: SyncedCollection<Habit>
    @ObservationIgnored private let logs: SyncedCollection<HabitLog>

    /// The board of `client`'s signed-in user.
    public init(client: Client) {
        self.client = client
        habitDocuments = client.collection("habits", of: Habit.self)
        logs = client.collection("habit_logs", of: HabitLog.self)
    }

    /// Reads the habits and the badge from the device.
    public func reload() throws {
        habits = try habitDocuments.documents().map(\.value).sorted { $0.name < $1.name }
        badge = Self.badge(client.syncStatus)
    }

    /// Follows the device's habits and the sync status until the task is cancelled (SwiftUI's `.task`).
    public func follow() async {
        async let habitsFollowed: Void = followHabits()
        async let statusFollowed: Void = followStatus()
        _ = await (habitsFollowed, statusFollowed)
    }

    private func followHabits() async {
        for await documents in habitDocuments.observe() { habits = documents.map(\.value).sorted { $0.name < $1.name } }
    }

    private func followStatus() async {
        for await status in client.syncStatusChanges { badge = Self.badge(status) }
    }

    /// Adds a habit (on the device at once).
    @discardableResult
    public func addHabit(_ name: String) throws -> Habit {
        let habit = Habit(id: UUID().uuidString.lowercased(), name: name)
        try habitDocuments.put(id: habit.id, habit)
        try reload()
        return habit
    }

    /// Marks `habit` done or not on `date` — what a tap on the day's cell asks, the cell's new state. Taps that
    /// ask what the device already shows (a double tap's second tap) write nothing: one change per decision.
    public func mark(_ habitId: String, on date: String, done: Bool) throws {
        try logs.patch(id: HabitLog.id(habitId: habitId, date: date), HabitLog(habitId: habitId, date: date, done: done))
        badge = Self.badge(client.syncStatus)
    }

    /// Whether `habit` is done on `date`, as the device shows it.
    public func isDone(_ habitId: String, on date: String) throws -> Bool {
        try logs.get(id: HabitLog.id(habitId: habitId, date: date))?.done ?? false
    }

    /// The done days of `habit` in `month` (`yyyy-mm`), read from the device: no request, however long the history.
    public func doneDays(_ habitId: String, month: String) throws -> [String] {
        let next = Self.nextMonth(month)
        return try logs.documents(from: month + "-01", to: next + "-01").map(\.value).filter { $0.habitId == habitId && $0.done }.map(\.date)
    }

    /// The app came to the foreground (SwiftUI's `scenePhase` becoming `.active`): shows what the widget wrote
    /// meanwhile, then syncs; the server's event stream reopens.
    public func appDidBecomeActive() throws {
        client.appDidBecomeActive()
        try reload()
    }

    /// The app went to the background (`scenePhase` becoming `.background`): the server's event stream closes, so no
    /// connection is held for an app iOS is about to suspend; a toggle made meanwhile (from a notification) still syncs.
    public func appDidEnterBackground() {
        client.appDidEnterBackground()
    }

    /// Runs one of the user's changes (a tap), showing in ``failure`` what goes wrong instead of dropping it.
    public func attempt(_ change: () throws -> Void) {
        do { try change() } catch { failure = "\(error)" }
    }

    /// The month after `yyyy-mm`.
    static func nextMonth(_ month: String) -> String {
        let parts = month.split(separator: "-").compactMap { Int($0) }
        guard parts.count == 2 else { return month }
        let (year, number) = parts[1] == 12 ? (parts[0] + 1, 1) : (parts[0], parts[1] + 1)
        return String(format: "%04d-%02d", year, number)
    }

    static func badge(_ status: SyncStatus) -> String {
        if status.isOffline { return "offline (\(status.pendingMutations) waiting)" }
        if status.pendingMutations > 0 || status.isSyncing { return "syncing (\(status.pendingMutations))" }
        return "saved"
    }
}
