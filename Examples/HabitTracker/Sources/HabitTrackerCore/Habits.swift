import Foundation
import TallyClient

/// A habit the user tracks.
public struct Habit: Codable, Sendable, Hashable, Identifiable {
    /// Its id (chosen on the device, so it can be created offline).
    public var id: String
    /// What the user calls it.
    public var name: String

    /// Creates a habit.
    public init(id: String, name: String) {
        self.id = id
        self.name = name
    }
}

/// Whether a habit was done on a day: the document `<habitId>_<date>` of `habit_logs`, ranged by `date`.
public struct HabitLog: Codable, Sendable, Hashable {
    /// The habit.
    public var habitId: String
    /// The day, `yyyy-mm-dd` in the user's calendar.
    public var date: String
    /// Done or not.
    public var done: Bool

    /// Creates a log.
    public init(habitId: String, date: String, done: Bool) {
        self.habitId = habitId
        self.date = date
        self.done = done
    }

    /// The document id of `habitId`'s log on `date`.
    public static func id(habitId: String, date: String) -> String { "\(habitId)_\(date)" }
}

/// How the app sets up its Tally client: the collections it syncs, where the session and documents live (an
/// App Group container, so the widget shares both).
public enum HabitTrackerSetup {
    /// The app's client for `server`, its session and documents under `home` (the App Group container on iOS).
    public static func client(server: URL, home: URL) throws -> Client {
        var configuration = ClientConfiguration(
            baseURL: server, secureStore: try FileSecureStore(directory: home.appendingPathComponent("session")))
        configuration.collections = [SyncedCollectionSpec("habits"), SyncedCollectionSpec("habit_logs", rangeKey: "date")]
        configuration.documentsDirectory = home.appendingPathComponent("documents")
        return Client(configuration: configuration)
    }
}
