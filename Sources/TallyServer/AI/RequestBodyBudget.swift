import Foundation
import HTTPTypes
import Hummingbird
import Synchronization
import TallyAPI

/// How many bytes of chat bodies a process holds at once (`ai.requestBytesInFlight`): a pure count, so its rule is
/// tested without a server.
struct ByteBudget: Sendable, Hashable {
    /// The most bytes reserved at once.
    let capacity: Int
    /// Bytes reserved now.
    private(set) var reserved = 0

    /// A budget of `capacity` bytes, none reserved.
    init(capacity: Int) { self.capacity = max(capacity, 0) }

    /// Reserves `bytes` (≥ 0) if they fit in what is left; `false`, and nothing reserved, when they do not.
    mutating func reserve(_ bytes: Int) -> Bool {
        guard bytes >= 0, bytes <= capacity - reserved else { return false }
        reserved += bytes
        return true
    }

    /// Gives back `bytes` reserved before.
    mutating func release(_ bytes: Int) {
        reserved = max(reserved - max(bytes, 0), 0)
    }
}

/// The chat route's body budget in this process: a request reserves its declared length (`Content-Length`, else the
/// most a body may be) before its body is read, and gives it back when the ``Reservation`` ends — when the call that
/// holds its bytes ends. Beyond the budget the request is answered 503 `busy` with `Retry-After`, its body unread.
final class RequestBodyBudget: Sendable {
    /// The largest chat body (`ai.maxRequestBytes`).
    let maxBodyBytes: Int
    private let budget: Mutex<ByteBudget>

    /// A budget of `bytesInFlight` for bodies of at most `maxBodyBytes`.
    init(maxBodyBytes: Int, bytesInFlight: Int) {
        self.maxBodyBytes = maxBodyBytes
        self.budget = Mutex(ByteBudget(capacity: bytesInFlight))
    }

    /// Bytes reserved now (tests, metrics).
    var reserved: Int { budget.withLock { $0.reserved } }

    /// Reserves what `request`'s body may take: 413 `body_too_large` when it declares more than ``maxBodyBytes``,
    /// 503 `busy` (`Retry-After: 1`) when the budget cannot take it now. Nothing of the body is read.
    func reserve(for request: Request) throws(APIError) -> Reservation {
        let declared = request.headers[.contentLength].flatMap { Int($0) }.map { max($0, 0) }
        if let declared, declared > maxBodyBytes {
            throw APIError(.bodyTooLarge, "The request body is \(declared) bytes; the limit is \(maxBodyBytes).")
        }
        let bytes = declared ?? maxBodyBytes
        guard budget.withLock({ $0.reserve(bytes) }) else {
            throw APIError(
                .busy, "The server is reading as many large requests as it holds at once; retry in a second. Nothing was charged.",
                headers: [.retryAfter: "1"])
        }
        return Reservation(budget: self, bytes: bytes)
    }

    fileprivate func release(_ bytes: Int) { budget.withLock { $0.release(bytes) } }

    /// Bytes reserved for one body, given back once: by ``end()``, or when the last reference to it goes.
    final class Reservation: Sendable {
        private let budget: RequestBodyBudget
        /// The bytes reserved now; nil once given back.
        private let held: Mutex<Int?>

        fileprivate init(budget: RequestBodyBudget, bytes: Int) {
            self.budget = budget
            self.held = Mutex(bytes)
        }

        /// The bytes reserved now (0 once given back).
        var bytes: Int { held.withLock { $0 ?? 0 } }

        /// Keeps `bytes` of the reservation, giving the rest back: a body read without a declared length is held at
        /// its real size, not at the most a body may be.
        func keep(_ bytes: Int) {
            let freed = held.withLock { held -> Int in
                guard let reserved = held, bytes < reserved else { return 0 }
                held = max(bytes, 0)
                return reserved - max(bytes, 0)
            }
            if freed > 0 { budget.release(freed) }
        }

        /// Gives the bytes back (again: nothing).
        func end() {
            let freed = held.withLock { held in defer { held = nil }; return held ?? 0 }
            if freed > 0 { budget.release(freed) }
        }

        deinit { end() }
    }
}
