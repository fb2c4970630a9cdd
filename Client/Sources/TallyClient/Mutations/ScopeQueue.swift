
/// Runs work of one scope strictly in order, first come first served; different scopes never wait
/// for each other. This is what keeps a double tap from sending its second write before the first settled.
final class ScopeQueue: Sendable {
    private struct Lane {
        var busy = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let lanes = Locked<[String: Lane]>([:])

    init() {}

    /// Runs `body` once every earlier entry of `scope` has finished.
    func run<T: Sendable>(_ scope: String, _ body: () async throws -> T) async throws -> T {
        await enter(scope)
        defer { leave(scope) }
        return try await body()
    }

    private func enter(_ scope: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let admitted = lanes.withLock { lanes -> Bool in
                if lanes[scope, default: Lane()].busy {
                    lanes[scope]!.waiters.append(continuation)
                    return false
                }
                lanes[scope, default: Lane()].busy = true
                return true
            }
            if admitted { continuation.resume() }
        }
    }

    private func leave(_ scope: String) {
        let next = lanes.withLock { lanes -> CheckedContinuation<Void, Never>? in
            guard var lane = lanes[scope] else { return nil }
            if lane.waiters.isEmpty {
                lanes[scope] = nil
                return nil
            }
            let next = lane.waiters.removeFirst()
            lanes[scope] = lane
            return next
        }
        next?.resume()
    }
}
