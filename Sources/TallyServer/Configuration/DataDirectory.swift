import Foundation
#if canImport(CDispatch)
// `stat` comes from whichever C module the compiler met it in first; in some orders of this module's files that is
// CDispatch (through NIO), and MemberImportVisibility then wants it imported here.
import CDispatch
#endif
#if canImport(CoreFoundation)
// …or CoreFoundation (through Foundation), in other orders.
import CoreFoundation
#endif

/// The data directory holds the embedded database (sessions, ledger), the admin key and the signing keys:
/// only the server's own user may read it. The directory is 0700 and Tally's files in it 0600, whatever
/// the process's umask, and a directory or file found wider (an install from before this rule) is narrowed.
/// The directory is Tally's alone: it is narrowed even when it existed before.
public enum DataDirectory {
    /// The files Tally keeps there (by name prefix).
    static let ownFiles = ["tally.sqlite", "admin-key", "signing-keys"]

    /// Creates `path` (mode 0700) if missing, and narrows it and Tally's files directly in it to the owner.
    /// Returns the names it narrowed, for a log line.
    @discardableResult
    public static func prepare(_ path: String) throws -> [String] {
        let manager = FileManager.default
        if !manager.fileExists(atPath: path) {
            try manager.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        var narrowed: [String] = []
        if try narrow(path, to: 0o700) { narrowed.append(".") }
        for name in try manager.contentsOfDirectory(atPath: path) where ownFiles.contains(where: name.hasPrefix) {
            let file = (path as NSString).appendingPathComponent(name)
            var isDirectory: ObjCBool = false
            guard manager.fileExists(atPath: file, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            if try narrow(file, to: 0o600) { narrowed.append(name) }
        }
        return narrowed
    }

    /// Creates the empty file `path` with mode 0600 unless it exists: SQLite then gives its `-wal` and
    /// `-shm` files the same mode.
    public static func createPrivateFile(_ path: String) throws {
        let descriptor = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw ConfigurationError("cannot create \(path): \(String(cString: strerror(errno)))") }
        close(descriptor)
        _ = try narrow(path, to: 0o600)
    }

    /// Writes `data` to the new file `path` (which must not exist) with mode 0600, and flushes it to disk.
    static func writePrivate(_ data: Data, to path: String) throws {
        let descriptor = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw ConfigurationError("cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        let written = data.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == data.count, fsync(descriptor) == 0 else { throw ConfigurationError("cannot write \(path)") }
    }

    /// Removes group and other permissions from `path` if it has any; returns whether it had.
    private static func narrow(_ path: String, to mode: mode_t) throws -> Bool {
        var info = stat()
        guard stat(path, &info) == 0 else { return false }
        guard info.st_mode & 0o077 != 0 else { return false }
        guard chmod(path, mode) == 0 else { throw ConfigurationError("cannot restrict \(path) to its owner") }
        return true
    }
}
