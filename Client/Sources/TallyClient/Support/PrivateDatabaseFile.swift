import Foundation

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
}
