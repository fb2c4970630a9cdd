import Foundation
import NIOCore
import NIOHTTP1
import TallyAPI
import TallyClient

/// A simulated phone that syncs a habit log (`load_logs`, ranged by `date`) over raw HTTP, like the SDK's sync
/// engine: an outbox of numbered mutations pushed in order and resent unchanged until the server answers, one
/// event stream open (`GET /v1/sync/events`), pulls on `changed` events and now and then. Flaky on purpose: some
/// pushes are abandoned mid-flight and resent, some answered batches are sent again. Everything it is told goes
/// into its ``SyncExpectation`` for ``SyncBooksChecker``.
final class SyncUser: @unchecked Sendable {
    /// The collection the load configuration declares for sync users.
    static let collection = "load_logs"

    let raw: RawUser
    private let group: any EventLoopGroup
    private var rng: SplitMix
    private(set) var expectation: SyncExpectation
    /// Mutations not yet acknowledged, oldest first (resent unchanged until they are).
    private var outbox: [SyncMutation] = []
    /// The documents this phone believes live (what its next patch or delete may name).
    private var live: [String] = []
    private var nextId: Int64 = 1
    private var cursor: String?
    private var stream: EventStreamClient?
    private let events = EventCounter()

    init(raw: RawUser, group: any EventLoopGroup) {
        self.raw = raw
        self.group = group
        rng = SplitMix(seed: UInt64(bitPattern: Int64(raw.index)) &* 0xA24B_AED4_963E_E407)
        var secret = SystemRandomNumberGenerator()
        let clientId = (0..<2).map { _ in String(format: "%016llx", secret.next() as UInt64) }.joined()
        expectation = SyncExpectation(userId: "", clientId: clientId)
    }

    private var recorder: LatencyRecorder { raw.caller.recorder }

    /// Signs in, then opens the event stream.
    func setUp(initialGrant: Int64) async -> Bool {
        guard await raw.setUp(initialGrant: initialGrant) else { return false }
        expectation.userId = raw.expectation.userId
        await openStream()
        return true
    }

    private func openStream() async {
        guard let token = raw.session?.accessToken else { return }
        let (host, port) = (raw.caller.connection.host, raw.caller.connection.port)
        let events = events
        stream = try? await EventStreamClient.open(
            host: host, port: port, path: "/v1/sync/events", headers: [("Authorization", "Bearer \(token)")], group: group
        ) { event in events.received(event.name) }
    }

    /// Runs one operation of the sync mix.
    func run(_ kind: OperationKind, scheduled: ContinuousClock.Instant) async {
        switch kind {
        case .syncPush: await push(scheduled: scheduled)
        case .syncPull: await pull(scheduled: scheduled)
        default: await raw.run(kind, scheduled: scheduled)
        }
        // A `changed` event since the last pull is a hint to pull, as the SDK takes it.
        if events.takeChanged() { await pull(scheduled: .now) }
    }

    // MARK: Push

    /// Makes 1–5 changes, then pushes the outbox: sometimes abandoning the first attempt, sometimes sending an
    /// answered batch a second time.
    private func push(scheduled: ContinuousClock.Instant) async {
        for _ in 0..<(1 + Int(rng.next() % 5)) { outbox.append(nextMutation()) }
        let abandon = rng.next() % 20 == 0
        let resend = rng.next() % 20 == 0
        let sent = events.changedCount
        guard await sendOutbox(operation: "sync.push", scheduled: scheduled, abandonFirst: abandon) else { return }
        if events.changedCount == sent { events.awaitChanged(since: scheduled, recorder: recorder) }
        if resend, let last = expectation.mutations.last {
            // The same batch again, as a phone that lost the answer would: every mutation must come back a duplicate.
            await pushBatch([last], operation: "sync.push-again", scheduled: .now)
        }
    }

    /// Sends the outbox until the server answers (the caller retries transport failures); true when answered.
    @discardableResult
    func sendOutbox(operation: String, scheduled: ContinuousClock.Instant, abandonFirst: Bool = false) async -> Bool {
        guard !outbox.isEmpty else { return true }
        let batch = Array(outbox.prefix(100))
        let request = pushRequest(batch)
        if abandonFirst { try? await raw.caller.connection.abandon(authorized(request)) }
        return await pushBatch(batch, operation: operation, scheduled: scheduled)
    }

    @discardableResult
    private func pushBatch(_ batch: [SyncMutation], operation: String, scheduled: ContinuousClock.Instant) async -> Bool {
        guard let response = await raw.call(operation, pushRequest(batch), expected: [200], scheduled: scheduled),
            response.status == 200, let answer = APICaller.decode(SyncPushResponse.self, response)
        else { return false }
        expectation.record(answer)
        outbox.removeAll { $0.id <= answer.lastMutationId }
        return true
    }

    private func pushRequest(_ batch: [SyncMutation]) -> LoadRequest {
        LoadRequest(.POST, "/v1/sync/push", body: APICaller.json(SyncPushRequest(clientId: expectation.clientId, mutations: batch)))
    }

    private func authorized(_ request: LoadRequest) -> LoadRequest {
        var request = request
        if let session = raw.session { request.headers.append(("Authorization", "Bearer \(session.accessToken)")) }
        return request
    }

    /// A put of a new day (half the time), else a patch or a delete of a day this phone has.
    private func nextMutation() -> SyncMutation {
        defer { nextId += 1 }
        let choice = rng.next() % 10
        if live.isEmpty || choice < 5 {
            let day = Int(rng.next() % 365)
            let date = Self.date(day)
            let docId = "d\(day)"
            if !live.contains(docId) { live.append(docId) }
            let data: JSONValue = .object(["date": .string(date), "done": .bool(true), "note": .string("m\(nextId)")])
            let mutation = SyncMutation(id: nextId, op: .put, collection: Self.collection, docId: docId, data: data)
            expectation.mutations.append(mutation)
            return mutation
        }
        let index = Int(rng.next() % UInt64(live.count))
        let docId = live[index]
        let mutation: SyncMutation
        if choice < 8 {
            let patch: JSONValue = .object(["done": .bool(rng.next() & 1 == 0), "note": .string("m\(nextId)")])
            mutation = SyncMutation(id: nextId, op: .patch, collection: Self.collection, docId: docId, data: patch)
        } else {
            live.remove(at: index)
            mutation = SyncMutation(id: nextId, op: .delete, collection: Self.collection, docId: docId)
        }
        expectation.mutations.append(mutation)
        return mutation
    }

    static func date(_ day: Int) -> String {
        let month = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        var (rest, index) = (day, 0)
        while rest >= month[index] {
            rest -= month[index]
            index += 1
        }
        return String(format: "2027-%02d-%02d", index + 1, rest + 1)
    }

    // MARK: Pull

    /// Pulls from the cursor until the server has no more.
    private func pull(scheduled: ContinuousClock.Instant) async {
        while true {
            var path = "/v1/sync/pull?limit=500"
            if let cursor { path += "&cursor=\(cursor)" }
            guard let response = await raw.call("sync.pull", LoadRequest(.GET, path), expected: [200, 410], scheduled: scheduled),
                response.status == 200, let page = APICaller.decode(SyncPullResponse.self, response)
            else {
                cursor = nil
                return
            }
            cursor = page.cursor
            if !page.hasMore { return }
        }
    }

    // MARK: The end of the run

    /// Pushes what the outbox still holds (the run's settle phase), then closes the stream; true when empty.
    func settle() async -> Bool {
        var rounds = 0
        while !outbox.isEmpty, rounds < 20 {
            rounds += 1
            await sendOutbox(operation: "sync.settle", scheduled: .now)
        }
        await stream?.close()
        return outbox.isEmpty
    }

    /// The server's state of this user: a full pull from no cursor.
    func serverState() async -> SyncServerState? {
        var documents: [Document] = []
        var cursor: String?
        var lastMutationId: Int64?
        while true {
            var path = "/v1/sync/pull?limit=500"
            if let cursor { path += "&cursor=\(cursor)" }
            guard let response = await raw.call("books.pull", LoadRequest(.GET, path), expected: [200], scheduled: .now),
                response.status == 200, let page = APICaller.decode(SyncPullResponse.self, response)
            else { return nil }
            // A first pull (no cursor) lists live documents; later pages may also carry changes after it.
            for change in page.changes {
                documents.removeAll { $0.id == change.id }
                if !change.deleted { documents.append(change) }
            }
            lastMutationId = page.lastMutationIds[expectation.clientId] ?? lastMutationId
            cursor = page.cursor
            if !page.hasMore { return SyncServerState(documents: documents, lastMutationId: lastMutationId) }
        }
    }

    /// The events the stream delivered.
    var eventCounts: (changed: Int, wallet: Int) { (events.changedCount, events.walletCount) }
}

/// What a user's event stream delivered, counted on the stream's event loop and read by the user's task.
final class EventCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var changed = 0, wallet = 0, unseenChanged = false
    private var waiting: (since: ContinuousClock.Instant, recorder: LatencyRecorder)?

    func received(_ name: String) {
        lock.lock()
        defer { lock.unlock() }
        switch name {
        case "changed":
            changed += 1
            unseenChanged = true
            if let (since, recorder) = waiting {
                // Write → event: from the push's scheduled start to the `changed` event that followed it.
                recorder.record("sync.event", scheduled: since, completed: .now, outcome: .expected(200))
                waiting = nil
            }
        case "wallet": wallet += 1
        default: break
        }
    }

    /// Times the next `changed` event from `since`.
    func awaitChanged(since: ContinuousClock.Instant, recorder: LatencyRecorder) {
        lock.lock()
        waiting = (since, recorder)
        lock.unlock()
    }

    /// Whether a `changed` event came since the last call.
    func takeChanged() -> Bool {
        lock.lock()
        defer {
            unseenChanged = false
            lock.unlock()
        }
        return unseenChanged
    }

    var changedCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return changed
    }

    var walletCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return wallet
    }
}
