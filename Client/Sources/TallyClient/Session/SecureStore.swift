import Foundation
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Small secrets (the installation secret, the refresh token) kept where other apps and backups cannot read them.
public protocol SecureStore: Sendable {
    /// The secret stored under `name`, or nil if there is none.
    func read(_ name: String) throws -> Data?
    /// Stores `data` under `name`, replacing any previous secret.
    func write(_ data: Data, for name: String) throws
    /// Deletes the secret under `name`; deleting a missing secret is not an error.
    func delete(_ name: String) throws
    /// A file that every client sharing this store locks while it changes the session, so that processes
    /// sharing it (an app and its extensions) never present the same refresh token twice; nil when the store
    /// is not shared between processes.
    var lockFile: URL? { get }
}

extension SecureStore {
    /// None: clients of this store coordinate only within their own process.
    public var lockFile: URL? { nil }
}

/// A failure of a ``SecureStore``; its description names the secret and the cause, never its content.
public struct SecureStoreError: Error, CustomStringConvertible {
    /// The name of the secret involved.
    public var name: String
    /// Why the operation failed.
    public var reason: String

    /// Creates an error.
    public init(name: String, reason: String) {
        self.name = name
        self.reason = reason
    }

    /// A short description without the secret.
    public var description: String { "secure store \"\(name)\": \(reason)" }
}

/// Files with permissions 0600 inside a directory with permissions 0700 (Linux, and tests).
/// Writes are atomic (write temp file with 0600 then rename). Names are restricted to
/// [A-Za-z0-9._-] (throw otherwise); `.lock` is the store's ``lockFile``, so processes sharing the
/// directory share the session.
public struct FileSecureStore: SecureStore {
    private let directory: URL
    private static let lockName = ".lock"

    /// `.lock` in the directory.
    public var lockFile: URL? { directory.appendingPathComponent(Self.lockName, isDirectory: false) }

    /// Uses `directory`, creating it if needed, and restricts it to its owner (0700).
    public init(directory: URL) throws {
        self.directory = directory
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory.path)
        } catch {
            throw SecureStoreError(name: directory.lastPathComponent, reason: "cannot prepare directory: \(Self.describe(error))")
        }
    }

    /// The secret stored under `name`, or nil.
    public func read(_ name: String) throws -> Data? {
        let url = try fileURL(name)
        do {
            return try Data(contentsOf: url)
        } catch CocoaError.fileReadNoSuchFile, CocoaError.fileNoSuchFile {
            return nil
        } catch {
            throw SecureStoreError(name: name, reason: "cannot read: \(Self.describe(error))")
        }
    }

    /// Writes `data` to a fresh 0600 temporary file, flushes it, then renames it over `name`.
    public func write(_ data: Data, for name: String) throws {
        let url = try fileURL(name)
        let temporary = directory.appendingPathComponent(".tmp-\(UUID().uuidString)-\(name)")
        let fd = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Self.posixError(name, "cannot create") }
        var failure: SecureStoreError?
        data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Self.posixWrite(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    failure = Self.posixError(name, "cannot write")
                    return
                }
                offset += written
            }
        }
        if failure == nil, fsync(fd) != 0 { failure = Self.posixError(name, "cannot flush") }
        close(fd)
        if failure == nil, rename(temporary.path, url.path) != 0 { failure = Self.posixError(name, "cannot rename") }
        if let failure {
            unlink(temporary.path)
            throw failure
        }
    }

    /// Deletes the file for `name`, if any.
    public func delete(_ name: String) throws {
        let url = try fileURL(name)
        if unlink(url.path) != 0, errno != ENOENT { throw Self.posixError(name, "cannot delete") }
    }

    private func fileURL(_ name: String) throws -> URL {
        let allowed = name.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"): true
            default: false
            }
        }
        guard allowed, !name.isEmpty, name != ".", name != "..", name != Self.lockName else {
            throw SecureStoreError(name: name, reason: "invalid name: use only A-Z a-z 0-9 . _ - (and not .lock)")
        }
        return directory.appendingPathComponent(name, isDirectory: false)
    }

    private static func posixWrite(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Darwin)
        Darwin.write(fd, bytes, count)
        #elseif canImport(Glibc)
        Glibc.write(fd, bytes, count)
        #elseif canImport(Musl)
        Musl.write(fd, bytes, count)
        #endif
    }

    private static func posixError(_ name: String, _ what: String) -> SecureStoreError {
        SecureStoreError(name: name, reason: "\(what): \(String(cString: strerror(errno)))")
    }

    private static func describe(_ error: any Error) -> String { (error as NSError).localizedDescription }
}

/// Secrets in memory only, for tests and previews.
public final class MemorySecureStore: SecureStore {
    private let secrets = Locked<[String: Data]>([:])

    /// Creates an empty store.
    public init() {}

    /// The secret stored under `name`, or nil.
    public func read(_ name: String) -> Data? { secrets.withLock { $0[name] } }

    /// Stores `data` under `name`.
    public func write(_ data: Data, for name: String) { secrets.withLock { $0[name] = data } }

    /// Deletes the secret under `name`.
    public func delete(_ name: String) { secrets.withLock { _ = $0.removeValue(forKey: name) } }
}
