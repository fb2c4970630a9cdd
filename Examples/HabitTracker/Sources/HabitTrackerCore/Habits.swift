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

/// How the app sets up its Tally client: the collections it syncs, where the session and documents live (shared with
/// the widget).
public enum HabitTrackerSetup {
    /// The client for `server` with its session in plain files under `home` (`FileSecureStore`) and its documents
    /// beside them: for the command line and the tests, where `home` plays the App Group container the app and its
    /// widget process share. The app on an Apple platform uses ``client(server:appGroup:)``, which keeps the session in
    /// the Keychain.
    public static func client(server: URL, home: URL) throws -> Client {
        client(
            server: server, secureStore: try FileSecureStore(directory: home.appendingPathComponent("session")),
            documents: home.appendingPathComponent("documents"))
    }

    /// The client for `server` with the tracker's collections, its session in `secureStore` and its documents in
    /// `documents`.
    static func client(server: URL, secureStore: any SecureStore, documents: URL) -> Client {
        var configuration = ClientConfiguration(baseURL: server, secureStore: secureStore)
        configuration.collections = [SyncedCollectionSpec("habits"), SyncedCollectionSpec("habit_logs", rangeKey: "date")]
        configuration.documentsDirectory = documents
        return Client(configuration: configuration)
    }
}

#if canImport(Security)
extension HabitTrackerSetup {
    /// The client for `server` on an Apple platform, the same in the app and in its widget: the session in the Keychain
    /// shared through the App Group `appGroup` (`KeychainSecureStore(appGroup:)`: the group's keychain items and a lock
    /// file in its container, so the app and the widget never both refresh the rotating refresh token), the documents
    /// in the group's container, where the widget's logs reach the app.
    ///
    /// The session is never in a file: the Keychain items are this device's only (accessible after first unlock,
    /// `ThisDeviceOnly`), so they are in no backup, and a backup restored onto another phone does not give two phones
    /// one rotating refresh token (the first to refresh would sign the other out) or one device secret. Add the App
    /// Groups capability with `appGroup` to the app and to the widget extension.
    /// - Throws: `SecureStoreError` when `appGroup` is not in the target's entitlements.
    public static func client(server: URL, appGroup: String) throws -> Client {
        let secureStore = try KeychainSecureStore(appGroup: appGroup)
        guard let container = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: appGroup) else {
            throw SecureStoreError(name: appGroup, reason: "no container for this app group: add it to the App Groups entitlement")
        }
        return client(server: server, secureStore: secureStore, documents: container.appendingPathComponent("documents"))
    }
}
#endif
