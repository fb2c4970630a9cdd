import Foundation
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An exclusive `flock(2)` on a file: every process (an app and its extensions) and every client that locks
/// the same path takes turns. The kernel releases it when the holder closes it or dies.
///
/// The session holds it only while it reads, changes and writes the stored session (at most one refresh
/// round trip), so a waiter is not kept long.
struct FileLock: Sendable {
    private let descriptor: Int32

    /// Opens (creating, 0600) and locks `url`; if another holder has it, waits on a thread of its own.
    static func acquire(_ url: URL) async throws -> FileLock {
        let descriptor = open(url.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw failure(url, "cannot open the lock file") }
        if flock(descriptor, LOCK_EX | LOCK_NB) == 0 { return FileLock(descriptor: descriptor) }
        guard errno == EWOULDBLOCK || errno == EINTR else {
            let error = failure(url, "cannot lock")
            close(descriptor)
            throw error
        }
        // Held by a sibling: a blocking wait wakes the moment it is released, without polling,
        // and keeps the blocked thread out of the cooperative pool.
        let status: Int32 = await withCheckedContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async {
                var result: Int32
                repeat { result = flock(descriptor, LOCK_EX) } while result != 0 && errno == EINTR
                continuation.resume(returning: result == 0 ? 0 : errno)
            }
        }
        guard status == 0 else {
            close(descriptor)
            throw SecureStoreError(name: url.lastPathComponent, reason: "cannot lock: \(String(cString: strerror(status)))")
        }
        return FileLock(descriptor: descriptor)
    }

    /// Releases the lock (closing the only descriptor of its open file).
    func release() { close(descriptor) }

    private static func failure(_ url: URL, _ what: String) -> SecureStoreError {
        SecureStoreError(name: url.lastPathComponent, reason: "\(what): \(String(cString: strerror(errno)))")
    }
}
