import Foundation
import GRDB

/// A database file only its owner can read: the directory is created `0700` and the file `0600` before SQLite
/// opens it (SQLite gives its -wal, -shm and journal files the database file's mode).
enum PrivateDatabaseFile {
    /// Creates `path`'s directory and an empty file at `path` when missing, and restricts both to the owner.
    static func prepare(path: String) throws {
        let fileManager = FileManager.default
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent()
        try fileManager.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        if !fileManager.fileExists(atPath: path) {
            // An empty file is a valid empty database.
            _ = fileManager.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        try? fileManager.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
    }

    /// Whether `path` is in an App Group container, which the app shares with its extensions: on iOS, tvOS, watchOS
    /// and visionOS `…/Containers/Shared/AppGroup/<UUID>/…`, on macOS `~/Library/Group Containers/<group>/…`. iOS kills
    /// a process suspended while it holds a lock on a file there (`0xDEAD10CC`), so such a database is opened with
    /// GRDB's `observesSuspensionNotifications` and suspended while the app is in the background. Pure.
    static func isInSharedContainer(_ path: String) -> Bool {
        let components = URL(fileURLWithPath: path).standardizedFileURL.pathComponents
        for index in components.indices.dropLast() {
            if components[index] == "Group Containers" { return true }
            if components[index] == "Shared", components[index + 1] == "AppGroup" { return true }
        }
        return false
    }

    /// GRDB's configuration for the database at `path`: suspendable when it is in an App Group container.
    static func suspensionObserved(_ configuration: inout Configuration, path: String) {
        configuration.observesSuspensionNotifications = isInSharedContainer(path)
    }
}
