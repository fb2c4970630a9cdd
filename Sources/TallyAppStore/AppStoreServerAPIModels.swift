import Foundation

/// The body of Send Consumption Information (v2, `PUT /inApps/v2/transactions/consumption/{transactionId}`): what the
/// developer tells Apple about a consumable whose customer asked for a refund (Apple's `ConsumptionRequest`).
public struct ConsumptionInformation: Codable, Sendable, Hashable {
    /// Whether the customer consented to sharing this; Apple refuses anything but `true` (400).
    public var customerConsented: Bool
    /// Whether the purchase was delivered and works.
    public var deliveryStatus: ConsumptionDeliveryStatus
    /// Whether the customer had a free sample of the content (free uses) before buying.
    public var sampleContentProvided: Bool
    /// How much of the purchase was consumed, in milliunits (0–100,000); nil when not told.
    public var consumptionPercentage: Int?
    /// What the developer would prefer Apple to decide; nil for no preference.
    public var refundPreference: RefundPreference?

    /// Creates the body.
    public init(
        customerConsented: Bool, deliveryStatus: ConsumptionDeliveryStatus, sampleContentProvided: Bool, consumptionPercentage: Int? = nil,
        refundPreference: RefundPreference? = nil
    ) {
        self.customerConsented = customerConsented
        self.deliveryStatus = deliveryStatus
        self.sampleContentProvided = sampleContentProvided
        self.consumptionPercentage = consumptionPercentage
        self.refundPreference = refundPreference
    }
}

/// Apple's `deliveryStatus` (v2): whether the purchase was delivered and works.
public struct ConsumptionDeliveryStatus: RawRepresentable, Codable, Sendable, Hashable {
    /// The name Apple uses.
    public var rawValue: String
    /// A status named `rawValue`.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Delivered and working.
    public static let delivered = Self(rawValue: "DELIVERED")
    /// Not delivered: a quality issue.
    public static let undeliveredQualityIssue = Self(rawValue: "UNDELIVERED_QUALITY_ISSUE")
    /// Not delivered: the wrong item.
    public static let undeliveredWrongItem = Self(rawValue: "UNDELIVERED_WRONG_ITEM")
    /// Not delivered: the server was down.
    public static let undeliveredServerOutage = Self(rawValue: "UNDELIVERED_SERVER_OUTAGE")
    /// Not delivered for another reason.
    public static let undeliveredOther = Self(rawValue: "UNDELIVERED_OTHER")
}

/// Apple's `refundPreference` (v2).
public struct RefundPreference: RawRepresentable, Codable, Sendable, Hashable {
    /// The name Apple uses.
    public var rawValue: String
    /// A preference named `rawValue`.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Decline the refund.
    public static let decline = Self(rawValue: "DECLINE")
    /// Grant a full refund.
    public static let grantFull = Self(rawValue: "GRANT_FULL")
    /// Grant a prorated refund.
    public static let grantProrated = Self(rawValue: "GRANT_PRORATED")
}

/// One page of Get Transaction History (v2) or Get Refund History (v2): signed transactions, and where the next starts.
public struct TransactionHistoryPage: Decodable, Sendable, Hashable {
    /// The token of the next page (`revision`).
    public var revision: String?
    /// Whether another page follows.
    public var hasMore: Bool
    /// The app's bundle id (history only).
    public var bundleId: String?
    /// The environment the history is from (history only).
    public var environment: String?
    /// The transactions, as JWS the App Store signed (verify them like any other).
    public var signedTransactions: [String]

    /// Creates a page.
    public init(revision: String?, hasMore: Bool, bundleId: String? = nil, environment: String? = nil, signedTransactions: [String]) {
        self.revision = revision
        self.hasMore = hasMore
        self.bundleId = bundleId
        self.environment = environment
        self.signedTransactions = signedTransactions
    }
}

/// The body of Get Notification History (`POST /inApps/v1/notifications/history`).
public struct NotificationHistoryQuery: Encodable, Sendable, Hashable {
    /// The earliest sending time, in milliseconds since 1970 (Apple keeps 180 days).
    public var startDate: Int64
    /// The latest sending time, in milliseconds since 1970.
    public var endDate: Int64
    /// Only notifications of this type.
    public var notificationType: String?
    /// Only notifications of this subtype.
    public var notificationSubtype: String?
    /// Only notifications that never reached the server.
    public var onlyFailures: Bool?
    /// Only notifications about this transaction's customer.
    public var transactionId: String?

    /// A query of the notifications sent between `start` and `end`.
    public init(start: Date, end: Date, onlyFailures: Bool? = nil, notificationType: String? = nil, transactionId: String? = nil) {
        startDate = Int64(exactly: (start.timeIntervalSince1970 * 1000).rounded(.down)) ?? 0
        endDate = Int64(exactly: (end.timeIntervalSince1970 * 1000).rounded(.down)) ?? 0
        self.onlyFailures = onlyFailures
        self.notificationType = notificationType
        self.transactionId = transactionId
    }
}

/// One page of Get Notification History.
public struct NotificationHistoryPage: Decodable, Sendable, Hashable {
    /// One notification and Apple's attempts to send it.
    public struct Item: Decodable, Sendable, Hashable {
        /// The notification, as it was (or would have been) posted: verify it like one received.
        public var signedPayload: String
        /// Each attempt (`SUCCESS`, `TIMED_OUT`, …).
        public var sendAttempts: [SendAttempt]?
    }

    /// One attempt to send a notification.
    public struct SendAttempt: Decodable, Sendable, Hashable {
        /// When, in milliseconds since 1970.
        public var attemptDate: Int64?
        /// How it went.
        public var sendAttemptResult: String?
    }

    /// The notifications.
    public var notificationHistory: [Item]
    /// Whether another page follows.
    public var hasMore: Bool
    /// The token of the next page.
    public var paginationToken: String?
}

/// The answer of Look Up Order ID: status 0 and the order's signed transactions, or status 1 for an unknown order.
public struct OrderLookup: Decodable, Sendable, Hashable {
    /// 0: valid; 1: invalid (no such order).
    public var status: Int
    /// The order's transactions, as JWS.
    public var signedTransactions: [String]?
}
