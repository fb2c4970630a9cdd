import Foundation
import NIOCore
import Synchronization

/// The app's backend as the load run plays it: at most `size` keep-alive connections to one server's
/// admin listener, shared by every simulated user of that server. A request takes a free connection,
/// or opens one while fewer than `size` exist, or waits for one to be given back.
final class AdminPool: Sendable {
    private struct State {
        var free: [AdminLine] = []
        var opened = 0
        var waiting: [CheckedContinuation<AdminLine, Never>] = []
    }

    private let state = Mutex(State())
    private let size: Int
    private let makeCaller: @Sendable () -> APICaller

    /// A pool of at most `size` connections to the admin listener at `url`.
    init(url: URL, size: Int, group: any EventLoopGroup, recorder: LatencyRecorder, timeout: Duration, deadline: Duration) {
        let (host, port) = (try? LoadRun.address(url)) ?? ("127.0.0.1", 0)
        self.size = size
        makeCaller = {
            APICaller(
                connection: LoadConnection(host: host, port: port, group: group), recorder: recorder, timeout: timeout,
                deadline: deadline)
        }
    }

    /// Sends `request` on a connection of the pool until it has a definitive answer (``APICaller/send(_:operation:)``).
    func send(_ request: LoadRequest, operation: String) async -> LoadResponse? {
        let line = await take()
        let response = await line.caller.send(request, operation: operation)
        give(line)
        return response
    }

    /// Closes the connections that are not in use (all of them once the run is over).
    func close() async {
        let lines = state.withLock { state in defer { state.free = [] }; return state.free }
        for line in lines { await line.caller.connection.close() }
    }

    private func take() async -> AdminLine {
        enum Next {
            case line(AdminLine)
            case open
            case wait
        }
        let next: Next = state.withLock { state in
            if let line = state.free.popLast() { return .line(line) }
            guard state.opened < size else { return .wait }
            state.opened += 1
            return .open
        }
        switch next {
        case .line(let line): return line
        case .open: return AdminLine(caller: makeCaller())
        case .wait:
            return await withCheckedContinuation { continuation in
                let line: AdminLine? = state.withLock { state in
                    // Given back between the two locks: take it instead of waiting.
                    if let line = state.free.popLast() { return line }
                    state.waiting.append(continuation)
                    return nil
                }
                if let line { continuation.resume(returning: line) }
            }
        }
    }

    private func give(_ line: AdminLine) {
        let waiter: CheckedContinuation<AdminLine, Never>? = state.withLock { state in
            if state.waiting.isEmpty {
                state.free.append(line)
                return nil
            }
            return state.waiting.removeFirst()
        }
        waiter?.resume(returning: line)
    }
}

/// One admin connection, used by one request at a time (it is out of the pool meanwhile).
final class AdminLine: @unchecked Sendable {
    let caller: APICaller
    init(caller: APICaller) { self.caller = caller }
}
