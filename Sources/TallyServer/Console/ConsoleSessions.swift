import Foundation
import Synchronization

/// The console's signed-in operators, in this process's memory: a session is a random 256-bit token in an `HttpOnly`
/// cookie, good for 12 hours from sign-in or until signed out. A restart signs every operator out, and with several
/// processes behind one address an operator signs in to each (the admin listener is per process anyway).
final class ConsoleSessions: Sendable {
    /// How long a session lasts from sign-in.
    static let lifetime: TimeInterval = 12 * 3600
    /// At most this many live sessions; signing in beyond it ends the oldest.
    static let capacity = 1000

    /// One operator's session.
    struct Session: Sendable {
        /// What the audit log and logs call it: a hash prefix of the token, never the token.
        let label: String
        /// The token every form of the session carries (compared in constant time).
        let csrf: String
        let created: Date
        var expires: Date { created.addingTimeInterval(ConsoleSessions.lifetime) }
    }

    private let sessions = Mutex<[String: Session]>([:])

    /// Opens a session; returns its token (the cookie's value) and the session.
    func open(now: Date) -> (token: String, session: Session) {
        let token = Secrets.random(bytes: 32)
        let session = Session(label: "console-" + Secrets.sha256(token).prefix(12), csrf: Secrets.random(bytes: 24), created: now)
        sessions.withLock { sessions in
            sessions = sessions.filter { $0.value.expires > now }
            if sessions.count >= Self.capacity, let oldest = sessions.min(by: { $0.value.created < $1.value.created }) {
                sessions[oldest.key] = nil
            }
            sessions[token] = session
        }
        return (token, session)
    }

    /// The live session of `token`, if any (an expired one is forgotten).
    func session(_ token: String, now: Date) -> Session? {
        sessions.withLock { sessions in
            guard let session = sessions[token] else { return nil }
            guard session.expires > now else {
                sessions[token] = nil
                return nil
            }
            return session
        }
    }

    /// Ends the session of `token` (signing out).
    func close(_ token: String) {
        _ = sessions.withLock { $0.removeValue(forKey: token) }
    }
}

/// A submitted `application/x-www-form-urlencoded` body (or query string), read once.
struct ConsoleForm: Sendable {
    let fields: [String: String]

    /// Decodes `text`; a field given twice keeps its first value.
    init(_ text: String) {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = Self.decode(parts[0]) else { continue }
            let value = parts.count > 1 ? Self.decode(parts[1]) ?? "" : ""
            if fields[name] == nil { fields[name] = value }
        }
        self.fields = fields
    }

    subscript(_ name: String) -> String? { fields[name] }

    private static func decode(_ part: Substring) -> String? {
        part.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}
