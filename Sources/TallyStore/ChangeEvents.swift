import Foundation

/// Something of one user's changed: what `GET /v1/sync/events` streams announce. Every process that serves
/// streams must hear of it (on PostgreSQL through LISTEN/NOTIFY, ``ChangeBatch`` is the payload). An event
/// is a hint to look again, never the data itself: a stream that hears it reads the state it announces.
public enum ChangeEvent: Sendable, Hashable {
    /// The user's documents changed; `version` is their change counter after the write.
    case documents(userId: String, version: Int64)
    /// The user's wallet or quotas changed.
    case wallet(userId: String)
    /// The session signed out: its streams end.
    case sessionEnded(userId: String, sessionId: String)
    /// The account was deleted: all its streams end.
    case accountDeleted(userId: String)

    /// Whose event it is.
    public var userId: String {
        switch self {
        case .documents(let userId, _), .wallet(let userId), .sessionEnded(let userId, _), .accountDeleted(let userId): userId
        }
    }
}

/// Change events waiting to be sent, coalesced per user (several `documents` → the newest version, several
/// `wallet` → one), and their text encoding as NOTIFY payloads. Pure: the PostgreSQL notifier batches with it,
/// tests check the format without a database.
///
/// A payload is lines separated by `\n`: first `tally1 <origin>` (the sending process, so that it can skip
/// its own notifications), then one line per fact — `c <user> <version>` (documents changed), `w <user>`
/// (wallet changed), `s <user> <session>` (session ended), `d <user>` (account deleted), `r` (the sender lost
/// events: every process should treat every stream as stale). Ids are Tally's UUIDs: an id that is empty,
/// longer than ``maxIdBytes`` or contains a space or line break is never encoded.
public struct ChangeBatch: Sendable, Hashable {
    /// What is waiting for one user.
    struct Pending: Sendable, Hashable {
        var version: Int64?
        var wallet = false
        var endedSessions: Set<String> = []
        var deleted = false
    }

    /// The longest user or session id encoded (Tally's are 36-character UUIDs).
    public static let maxIdBytes = 128
    /// The first word of every payload; a payload without it is not Tally's.
    static let magic = "tally1"

    private(set) var users: [String: Pending] = [:]
    /// Whether events were dropped (``add(_:maxUsers:)`` over its bound): receivers must resynchronise.
    public private(set) var lostEvents = false

    /// An empty batch.
    public init() {}

    /// A batch of `events`.
    public init(_ events: some Sequence<ChangeEvent>) {
        for event in events { add(event) }
    }

    /// Whether nothing is waiting.
    public var isEmpty: Bool { users.isEmpty && !lostEvents }

    /// How many users have something waiting.
    public var userCount: Int { users.count }

    /// Adds `event`, coalesced with what waits for its user. Beyond `maxUsers` users the batch stops
    /// collecting (memory stays bounded) and records that events were lost.
    public mutating func add(_ event: ChangeEvent, maxUsers: Int = .max) {
        let userId = event.userId
        guard Self.encodable(userId) else { return }
        if users[userId] == nil, users.count >= maxUsers {
            lostEvents = true
            return
        }
        var pending = users[userId] ?? Pending()
        switch event {
        case .documents(_, let version): pending.version = max(pending.version ?? version, version)
        case .wallet: pending.wallet = true
        case .sessionEnded(_, let sessionId):
            guard Self.encodable(sessionId) else { return }
            pending.endedSessions.insert(sessionId)
        case .accountDeleted: pending.deleted = true
        }
        users[userId] = pending
    }

    /// Adds everything of `other` (a batch that could not be sent goes back in front of the new one).
    public mutating func merge(_ other: ChangeBatch, maxUsers: Int = .max) {
        for event in other.events { add(event, maxUsers: maxUsers) }
        lostEvents = lostEvents || other.lostEvents
    }

    /// The coalesced events, user by user (in no particular order of users).
    public var events: [ChangeEvent] {
        users.flatMap { userId, pending -> [ChangeEvent] in
            var events: [ChangeEvent] = []
            if let version = pending.version { events.append(.documents(userId: userId, version: version)) }
            if pending.wallet { events.append(.wallet(userId: userId)) }
            for session in pending.endedSessions.sorted() { events.append(.sessionEnded(userId: userId, sessionId: session)) }
            if pending.deleted { events.append(.accountDeleted(userId: userId)) }
            return events
        }
    }

    /// The batch as payloads of at most `limit` UTF-8 bytes each, every one starting with the `origin` line:
    /// as few as the limit allows (a user's lines may be split across two).
    public func payloads(origin: String, limit: Int) -> [String] {
        let header = "\(Self.magic) \(origin)"
        precondition(header.utf8.count + 2 * (Self.maxIdBytes + 24) <= limit, "the payload limit must fit a header and a line")
        var payloads: [String] = []
        var current = header
        func append(_ line: String) {
            if current.utf8.count + 1 + line.utf8.count > limit {
                payloads.append(current)
                current = header
            }
            current += "\n" + line
        }
        if lostEvents { append("r") }
        for event in events {
            switch event {
            case .documents(let userId, let version): append("c \(userId) \(version)")
            case .wallet(let userId): append("w \(userId)")
            case .sessionEnded(let userId, let sessionId): append("s \(userId) \(sessionId)")
            case .accountDeleted(let userId): append("d \(userId)")
            }
        }
        if current != header { payloads.append(current) }
        return payloads
    }

    /// A payload decoded: its origin, its events, and whether it says events were lost; `nil` when it is
    /// not a Tally payload. Lines it does not understand are skipped (a newer server may add kinds).
    public static func decode(_ payload: String) -> (origin: String, events: [ChangeEvent], lostEvents: Bool)? {
        let lines = payload.split(separator: "\n", omittingEmptySubsequences: true)
        guard let first = lines.first else { return nil }
        let header = first.split(separator: " ", omittingEmptySubsequences: false)
        guard header.count == 2, header[0] == magic, !header[1].isEmpty else { return nil }
        var events: [ChangeEvent] = []
        var lost = false
        for line in lines.dropFirst() {
            let fields = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
            guard let kind = fields.first else { continue }
            switch (kind, fields.count) {
            case ("c", 3):
                if let version = Int64(fields[2]), encodable(fields[1]) { events.append(.documents(userId: fields[1], version: version)) }
            case ("w", 2) where encodable(fields[1]):
                events.append(.wallet(userId: fields[1]))
            case ("s", 3) where encodable(fields[1]) && encodable(fields[2]):
                events.append(.sessionEnded(userId: fields[1], sessionId: fields[2]))
            case ("d", 2) where encodable(fields[1]):
                events.append(.accountDeleted(userId: fields[1]))
            case ("r", 1):
                lost = true
            default:
                continue
            }
        }
        return (String(header[1]), events, lost)
    }

    /// Whether an id can travel in a payload line.
    static func encodable(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= maxIdBytes && !id.utf8.contains { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D }
    }
}
