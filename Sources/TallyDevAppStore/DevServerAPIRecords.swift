import Foundation
import Synchronization

/// A Send Consumption Information body (`ConsumptionRequest`, the v2 endpoint's), as validated.
public struct DevConsumptionRequest: Sendable, Hashable, Codable {
    /// Whether the customer consented to share the data (Apple takes only `true`).
    public var customerConsented: Bool
    /// How much of the purchase was consumed, in milliunits (0 to 100_000), if sent.
    public var consumptionPercentage: Int?
    /// `DELIVERED`, `UNDELIVERED_QUALITY_ISSUE`, `UNDELIVERED_WRONG_ITEM`, `UNDELIVERED_SERVER_OUTAGE` or `UNDELIVERED_OTHER`.
    public var deliveryStatus: String
    /// Whether a sample or trial was offered before the purchase.
    public var sampleContentProvided: Bool
    /// `DECLINE`, `GRANT_FULL` or `GRANT_PRORATED`, if sent.
    public var refundPreference: String?

    /// The delivery statuses Apple takes.
    public static let deliveryStatuses: Set<String> = [
        "DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM", "UNDELIVERED_SERVER_OUTAGE", "UNDELIVERED_OTHER",
    ]
    /// The refund preferences Apple takes.
    public static let refundPreferences: Set<String> = ["DECLINE", "GRANT_FULL", "GRANT_PRORATED"]
}

/// Consumption information a server sent (`PUT /inApps/v2/transactions/consumption/{transactionId}`), as accepted.
public struct DevConsumptionAnswer: Sendable, Hashable, Codable {
    /// The transaction it is about.
    public var transactionId: String
    /// When it was received (the stand-in's clock).
    public var receivedAt: Date
    /// What was sent.
    public var body: DevConsumptionRequest
}

/// A request to the App Store Server API refused with 401.
public struct DevServerAPIRejection: Sendable, Hashable, Codable {
    /// When (the stand-in's clock).
    public var at: Date
    /// The request's method.
    public var method: String
    /// The request's path.
    public var path: String
    /// Why its token was refused.
    public var reason: String
}

/// An answer forced on the next requests to a path (`POST /faults`), before they are served normally.
public struct DevFault: Sendable, Hashable, Codable {
    /// The requests it answers: those whose path starts with it (`/inApps/v1/lookup/`).
    public var path: String
    /// The status answered.
    public var status: Int
    /// How many more requests it answers.
    public var remaining: Int
    /// The `Retry-After` header answered (seconds), if any.
    public var retryAfter: Int?
    /// The `errorCode` of the Apple error body answered; nil: none (an empty body).
    public var errorCode: Int64?

    /// A fault answering the next `count` requests under `path` with `status`.
    public init(path: String, status: Int, count: Int = 1, retryAfter: Int? = nil, errorCode: Int64? = nil) {
        self.path = path
        self.status = status
        remaining = count
        self.retryAfter = retryAfter
        self.errorCode = errorCode
    }
}

/// What the stand-in's App Store Server API has received and is told to do: consumption answers, refused requests,
/// pending faults. Held by a ``DevAppStore`` (``DevAppStore/serverAPIRecords``).
public final class DevServerAPIRecords: Sendable {
    /// The records.
    private struct State {
        var answers: [DevConsumptionAnswer] = []
        var rejections: [DevServerAPIRejection] = []
        var faults: [DevFault] = []
        var offerNonces: Set<String> = []
        var offersAccepted = 0
    }

    /// The records, locked.
    private let state = Mutex(State())

    /// Empty records.
    public init() {}

    /// Every consumption answer accepted, in order.
    public var consumptionAnswers: [DevConsumptionAnswer] { state.withLock { $0.answers } }

    /// Every request refused with 401, in order.
    public var rejections: [DevServerAPIRejection] { state.withLock { $0.rejections } }

    /// The faults still to answer, in the order they were added.
    public var faults: [DevFault] { state.withLock { $0.faults } }

    /// Records an accepted consumption answer.
    public func record(_ answer: DevConsumptionAnswer) { state.withLock { $0.answers.append(answer) } }

    /// Records a refused request.
    public func record(_ rejection: DevServerAPIRejection) { state.withLock { $0.rejections.append(rejection) } }

    /// Adds `fault` after those pending (a request takes the first one matching its path).
    public func add(_ fault: DevFault) { state.withLock { $0.faults.append(fault) } }

    /// Drops every pending fault.
    public func clearFaults() { state.withLock { $0.faults.removeAll() } }

    /// The first pending fault whose path `path` starts with, counted down (and dropped at zero); nil when none matches.
    public func takeFault(for path: String) -> DevFault? {
        state.withLock { state in
            guard let index = state.faults.firstIndex(where: { path.hasPrefix($0.path) }) else { return nil }
            let fault = state.faults[index]
            state.faults[index].remaining -= 1
            if state.faults[index].remaining <= 0 { state.faults.remove(at: index) }
            return fault
        }
    }

    /// Takes an offer signature's nonce: false when it was used before (Apple accepts each once).
    public func takeOfferNonce(_ nonce: String) -> Bool {
        state.withLock { state in
            guard state.offerNonces.insert(nonce).inserted else { return false }
            state.offersAccepted += 1
            return true
        }
    }

    /// How many offer signatures purchases presented and the store accepted.
    public var offersAccepted: Int { state.withLock { $0.offersAccepted } }
}
