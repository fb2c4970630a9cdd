import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import TallyAPI
import TallyStore

/// One `GET /v1/sync/events` response body (``SyncEventsController``): subscribes to the ``EventHub``,
/// then writes what its ``EventSubscription`` collects until the subscription ends or a write fails (the
/// client went away: noticed at the latest by the heartbeat after next).
struct EventStream: Sendable {
    /// The hub the stream subscribes to.
    let hub: EventHub
    /// Where `wallet` events, sessions and missed changes are read.
    let store: any TallyStorage
    /// The clock of the heartbeats.
    let clock: any TallyClock
    /// The quotas as `wallet` events show them.
    let views: QuotaViews
    /// Seals the cursors of `changed` events.
    let cursors: CursorKeys
    let identity: Identity
    /// When the access token that opened the stream expires: the first heartbeat after it ends the stream.
    let expiresAt: Date
    /// The version the client said it has everything up to, if it did.
    let resumeFrom: Int64?

    func run(_ writer: inout any ResponseBodyWriter) async throws {
        try await stream(&writer)
        try await writer.finish(nil)
    }

    /// Writes events until the subscription ends; unsubscribed when it returns.
    private func stream(_ writer: inout any ResponseBodyWriter) async throws {
        let subscription = hub.subscribe(userId: identity.userId, sessionId: identity.sessionId)
        defer { hub.unsubscribe(subscription) }
        // Subscribed first, read second: what commits from now on is announced, what committed before is read.
        subscription.post { $0.wallet = true }
        if let resumeFrom, let newer = await versionAfter(resumeFrom) {
            subscription.post { $0.version = max($0.version ?? newer, newer) }
        }
        var output = ServerSentEvents.opening + ServerSentEvents.retry(millis: Int.random(in: 2_000...5_000))
        try await withGracefulShutdownHandler {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    while true {
                        try await clock.sleep(for: SyncEventsController.heartbeatInterval)
                        subscription.post { $0.heartbeat = true }
                    }
                }
                defer { group.cancelAll() }
                var walletOwed = false
                while true {
                    var pending = await subscription.next()
                    if pending.end != nil { return }
                    pending.wallet = pending.wallet || walletOwed
                    guard let events = await render(pending, walletOwed: &walletOwed) else { return }
                    output += events
                    try await writer.write(ByteBuffer(bytes: output))
                    output.removeAll(keepingCapacity: true)
                }
            }
        } onGracefulShutdown: {
            subscription.end(.shutdown)
        }
    }

    /// The bytes of `pending`, or nil when the stream must end (the account is gone, the session was
    /// revoked, the token expired). A wallet that cannot be read now (the database) is owed: it is sent
    /// with the next thing written.
    private func render(_ pending: PendingEvents, walletOwed: inout Bool) async -> [UInt8]? {
        var bytes: [UInt8] = []
        let userId = identity.userId
        if let version = pending.version {
            // Cannot fail: the keys are installed before the server serves.
            let cursor = (try? SyncCursor.encode(version: version, userId: userId, keys: cursors)) ?? ""
            bytes += ServerSentEvents.event("changed", id: cursor, data: ServerSentEvents.json(SyncChangedEvent(cursor: cursor)))
        }
        if pending.wallet {
            do {
                guard let state = try await store.accountState(userId: userId, now: clock.now) else { return nil }
                let event = SyncWalletEvent(
                    wallet: Wallet(state.wallet), quotas: views.quotas(for: state), premiumUntil: state.user.combinedPremiumUntil)
                bytes += ServerSentEvents.event("wallet", data: ServerSentEvents.json(event))
                walletOwed = false
            } catch {
                walletOwed = true
            }
        }
        if pending.heartbeat {
            guard await sessionIsLive() else { return nil }
            bytes += ServerSentEvents.heartbeat
        }
        return bytes
    }

    /// Whether the stream may go on: its token has not expired and its session is live. A database that
    /// cannot answer does not end streams (sign-outs reach them through notifications too).
    private func sessionIsLive() async -> Bool {
        guard clock.now < expiresAt else { return false }
        do {
            return try await store.liveSessionUser(sessionId: identity.sessionId) == identity.userId
        } catch {
            return true
        }
    }

    /// A version to announce when the user's documents changed after `version`, or nil when they did not.
    /// When the store cannot tell (the cursor is past tombstone retention, the database failed), the
    /// answer is "changed": the client pulls and finds out (a 410 tells it to start over).
    private func versionAfter(_ version: Int64) async -> Int64? {
        do {
            let page = try await store.changes(userId: identity.userId, after: version, limit: 1)
            return page.changes.isEmpty ? nil : max(page.cursor, version + 1)
        } catch {
            return version + 1
        }
    }
}

/// The `text/event-stream` framing (WHATWG HTML, "Server-sent events"). Data is one line of compact JSON.
enum ServerSentEvents {
    /// An event named `name` with `data` (which must hold no line break), and an `id` when given.
    static func event(_ name: String, id: String? = nil, data: [UInt8]) -> [UInt8] {
        var bytes = Array("event: \(name)\n".utf8)
        if let id { bytes += Array("id: \(id)\n".utf8) }
        bytes += Array("data: ".utf8) + data + Array("\n\n".utf8)
        return bytes
    }

    /// `value` as the API's compact JSON (no line breaks: string escapes only).
    static func json(_ value: some Encodable) -> [UInt8] { (try? JSONResponse.bytes(value)) ?? Array("{}".utf8) }

    /// A comment line: keeps proxies from closing a quiet connection, and is how the stream notices a client gone.
    static let heartbeat = Array(": heartbeat\n\n".utf8)

    /// The first bytes of every event stream the server answers: a comment of 2 KiB, which clients ignore. Apple's
    /// URLSession (CFNetwork) holds back a `text/*` response's head and first data until about 512 bytes came (content
    /// sniffing; Apple Developer Forums thread 64875): without this, a stream's first short events, or a short AI
    /// answer, could wait on a device for the next heartbeat or for more of the answer.
    static let opening = Array((":" + String(repeating: " ", count: openingBytes - 3) + "\n\n").utf8)

    /// The length of ``opening``.
    static let openingBytes = 2048

    /// The header fields of every event stream: its content type, not cached, not buffered by a proxy (nginx's
    /// `X-Accel-Buffering`), not sniffed.
    static let headerFields: HTTPFields = [
        .contentType: "text/event-stream", .cacheControl: "no-store", .xAccelBuffering: "no", .xContentTypeOptions: "nosniff",
    ]

    /// How long a client waits before reconnecting after the stream ends (spread, so that streams ended
    /// together do not come back together).
    static func retry(millis: Int) -> [UInt8] { Array("retry: \(millis)\n\n".utf8) }
}
