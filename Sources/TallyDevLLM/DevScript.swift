import Synchronization

/// What the local model does with one request, set through `POST /dev/script` so a test can make the next
/// requests fail, stall or answer at a given length without restarting the process.
public struct DevBehaviour: Codable, Hashable, Sendable {
    /// Answer with this HTTP status and an OpenAI-shaped error body, before any chunk (500, 429, 401, …).
    public var status: Int?
    /// Stream this many content chunks, then cut the connection (no `[DONE]`, no usage): a failure after the 200.
    public var failAfterChunks: Int?
    /// Stream this many content chunks, then wait for `POST /dev/release` before the rest.
    public var pauseAfterChunks: Int?
    /// The answer's length in tokens (before `max_tokens` cuts it), instead of the prompt's hash.
    public var answerTokens: Int?
    /// Wait for `POST /dev/release` before answering at all (before the response's head).
    public var pauseBeforeHead: Bool?
    /// After the first token, one token of this many bytes (`x`s): in a stream one `data:` line that long, in a whole
    /// answer a body that much longer; counted as one completion token. Written in 64 KiB pieces, so the local model
    /// holds none of it: a provider gone wrong, for the gateway's bounds.
    public var hugeTokenBytes: Int?
    /// The error of ``status`` (or, with ``failAfterChunks``, an error event in place of the cut) quotes the request's
    /// `Authorization` header, as a careless provider might: the gateway must not pass the key on.
    public var echoAuthorization: Bool?

    /// Creates a behaviour; every field nil is the default answer.
    public init(
        status: Int? = nil, failAfterChunks: Int? = nil, pauseAfterChunks: Int? = nil, answerTokens: Int? = nil,
        pauseBeforeHead: Bool? = nil, hugeTokenBytes: Int? = nil, echoAuthorization: Bool? = nil
    ) {
        self.status = status
        self.failAfterChunks = failAfterChunks
        self.pauseAfterChunks = pauseAfterChunks
        self.answerTokens = answerTokens
        self.pauseBeforeHead = pauseBeforeHead
        self.hugeTokenBytes = hugeTokenBytes
        self.echoAuthorization = echoAuthorization
    }
}

/// The body of `POST /dev/script`: behaviours for the next requests, in order (after them, the default).
public struct DevScriptRequest: Codable, Hashable, Sendable {
    /// One per request to come.
    public var behaviours: [DevBehaviour]

    /// Creates a script.
    public init(behaviours: [DevBehaviour]) { self.behaviours = behaviours }
}

/// What `GET /dev/stats` reports: what the local model was asked and did since it started (or `/dev/reset`).
public struct DevStats: Codable, Hashable, Sendable {
    /// `POST /v1/chat/completions` requests that passed the key check.
    public var completions: Int
    /// Of those, streamed ones.
    public var streams: Int
    /// Streams open now.
    public var openStreams: Int
    /// Streams waiting for `/dev/release` now.
    public var pausedStreams: Int
    /// Content chunks written, over every stream.
    public var contentChunks: Int
    /// Requests refused for a missing or wrong key.
    public var unauthorized: Int

    /// No requests yet.
    public init() {
        (completions, streams, openStreams, pausedStreams, contentChunks, unauthorized) = (0, 0, 0, 0, 0, 0)
    }
}

/// The local model's mutable state: the scripted behaviours, the counters, and the paused streams' waiters.
final class DevState: Sendable {
    private struct Inner {
        var script: [DevBehaviour] = []
        var stats = DevStats()
        var lastRequest: [UInt8]?
        var paused: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter = 0
    }

    private let inner = Mutex(Inner())

    /// The behaviour for the next request (and counts it).
    func nextBehaviour(streaming: Bool) -> DevBehaviour {
        inner.withLock { inner in
            inner.stats.completions += 1
            if streaming { inner.stats.streams += 1 }
            return inner.script.isEmpty ? DevBehaviour() : inner.script.removeFirst()
        }
    }

    func append(_ behaviours: [DevBehaviour]) { inner.withLock { $0.script += behaviours } }
    /// The body of the last completion request that passed the key check, as received (`GET /dev/last-request`).
    var lastRequest: [UInt8]? {
        get { inner.withLock { $0.lastRequest } }
        set { inner.withLock { $0.lastRequest = newValue } }
    }
    func unauthorized() { inner.withLock { $0.stats.unauthorized += 1 } }
    func streamOpened() { inner.withLock { $0.stats.openStreams += 1 } }
    func streamClosed() { inner.withLock { $0.stats.openStreams -= 1 } }
    func chunkWritten() { inner.withLock { $0.stats.contentChunks += 1 } }
    var stats: DevStats { inner.withLock { $0.stats } }

    /// Forgets the script and the counters (paused streams stay paused until released).
    func reset() {
        inner.withLock { inner in
            inner.script = []
            inner.lastRequest = nil
            let (open, paused) = (inner.stats.openStreams, inner.stats.pausedStreams)
            inner.stats = DevStats()
            (inner.stats.openStreams, inner.stats.pausedStreams) = (open, paused)
        }
    }

    /// Waits until ``releaseAll()`` (or the task is cancelled: a client that went away).
    func pause() async {
        let id = inner.withLock { inner in
            defer { inner.nextWaiter += 1 }
            return inner.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = inner.withLock { inner -> Bool in
                    if Task.isCancelled { return true }
                    inner.paused[id] = continuation
                    inner.stats.pausedStreams += 1
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            release(id)
        }
    }

    /// Lets every paused stream go on; how many there were.
    @discardableResult
    func releaseAll() -> Int {
        let waiters = inner.withLock { inner in
            defer {
                inner.paused = [:]
                inner.stats.pausedStreams = 0
            }
            return Array(inner.paused.values)
        }
        for waiter in waiters { waiter.resume() }
        return waiters.count
    }

    private func release(_ id: Int) {
        let waiter = inner.withLock { inner in
            let waiter = inner.paused.removeValue(forKey: id)
            if waiter != nil { inner.stats.pausedStreams -= 1 }
            return waiter
        }
        waiter?.resume()
    }
}
