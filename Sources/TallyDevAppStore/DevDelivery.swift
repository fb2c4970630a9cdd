import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// When the App Store tries a notification again: a delivery is answered 200-206 or it failed (another status, a refused
/// connection, a timeout), and a failed one is sent again 1, 12, 24, 48 and 72 hours after the attempt before —
/// five retries, six attempts in all. The stand-in compresses the hours: `hour` seconds of its clock stand for one.
public enum DevDeliverySchedule {
    /// Apple's waits between attempts, in hours.
    public static let retryHours: [Double] = [1, 12, 24, 48, 72]

    /// The wait after attempt `attempt` (1 is the first) failed, with `hour` seconds to the hour; nil after the last.
    public static func delay(afterAttempt attempt: Int, hour: TimeInterval) -> TimeInterval? {
        guard attempt >= 1, attempt <= retryHours.count else { return nil }
        return retryHours[attempt - 1] * hour
    }

    /// Whether an answer of `status` delivered the notification (Apple counts 200-206).
    public static func isDelivered(status: Int) -> Bool { (200...206).contains(status) }
}

/// One notification's delivery to the webhook (``DevAppStore/deliver(_:)``), with each attempt's outcome.
public struct DevDelivery: Sendable, Hashable, Codable {
    /// Where a delivery stands.
    public enum State: String, Sendable, Hashable, Codable {
        /// Not yet attempted, or an attempt under way.
        case pending
        /// Failed so far; ``DevDelivery/nextAttemptAt`` says when it is tried again.
        case retrying
        /// An attempt was answered 200-206.
        case delivered
        /// Every attempt failed.
        case failed
    }

    /// One POST to the webhook.
    public struct Attempt: Sendable, Hashable, Codable {
        /// When it was made (the stand-in's clock).
        public var at: Date
        /// The answer's status; nil when there was no answer.
        public var status: Int?
        /// Why there was no answer (a refused connection, a timeout).
        public var error: String?
    }

    /// The delivery's number, from 1.
    public var id: Int
    /// The notification delivered.
    public var notificationUUID: String
    /// Its type.
    public var notificationType: String
    /// Its subtype.
    public var subtype: String?
    /// The URL posted to.
    public var webhook: String
    /// Where it stands.
    public var state: State
    /// The attempts so far, in order.
    public var attempts: [Attempt]
    /// When the next attempt is due (``State/retrying``).
    public var nextAttemptAt: Date?
}

/// One POST of a signed notification to a webhook, as Apple sends it: its status code (the body read and dropped).
enum DevWebhook {
    static func post(_ body: [UInt8], to webhook: String, userAgent: String, timeout: TimeAmount) async throws -> Int {
        var request = HTTPClientRequest(url: webhook)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: userAgent)
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await HTTPClient.shared.execute(request, timeout: timeout)
        _ = try? await response.body.collect(upTo: 64 * 1024)
        return Int(response.status.code)
    }
}
