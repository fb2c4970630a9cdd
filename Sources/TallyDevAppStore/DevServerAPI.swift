import Foundation
import Hummingbird
import NIOCore
import TallyAPI
import TallyAppStore
import TallyAppleJWS

/// The App Store Server API (`https://api.storekit.itunes.apple.com/inApps/…`) as Apple serves it, over a
/// ``DevAppStore``'s transactions and notifications, with its stand-in controls (mounted by
/// ``buildDevAppStoreApplication(store:appleID:host:port:logger:onServerRunning:)``). A customer is an
/// `appAccountToken` (``DevAppStore/customerTransactions(of:)``). Errors are Apple's `{"errorCode", "errorMessage"}`
/// (``DevAppleAPIError``); a request without a valid bearer token is answered 401 as Apple does
/// (``DevServerAPIAuthentication``).
struct DevServerAPI: Sendable {
    /// The store served.
    let store: DevAppStore
    /// The stand-in's routes, whose JSON bodies and answers these share.
    let api: DevAppStoreAPI

    /// A page of a history (Apple's: 20 records).
    static let pageSize = 20

    /// Adds the routes to `router`.
    func add(to router: Router<BasicRequestContext>) {
        router.get("server-api-key") { _, _ in
            let key = store.serverAPIKey
            return DevAppStoreAPI.json(KeyAnswer(keyId: key.keyId, issuerId: key.issuerId, privateKeyPEM: key.privateKeyPEM))
        }
        router.get("server-api-rejections") { _, _ in
            let rejections = store.serverAPIRecords.rejections
            return DevAppStoreAPI.json(RejectionsAnswer(count: rejections.count, rejections: rejections))
        }
        router.get("consumption-answers") { _, _ in DevAppStoreAPI.json(["answers": store.serverAPIRecords.consumptionAnswers]) }
        router.get("faults") { _, _ in DevAppStoreAPI.json(["faults": store.serverAPIRecords.faults]) }
        router.post("faults") { request, _ in
            try await api.answer(request, as: FaultBody.self) { body in
                guard body.path.hasPrefix("/"), (100...599).contains(body.status), (body.count ?? 1) >= 1, (body.retryAfter ?? 0) >= 0 else {
                    throw DevAppStore.Failure(
                        code: "bad_request", message: "a fault is {path: \"/…\", status: 100-599, count?: ≥ 1, retryAfter?, errorCode?}",
                        status: 400)
                }
                store.serverAPIRecords.add(
                    DevFault(
                        path: body.path, status: body.status, count: body.count ?? 1, retryAfter: body.retryAfter,
                        errorCode: body.errorCode ?? DevAppleAPIError.defaultCode(status: body.status)))
                return ["faults": store.serverAPIRecords.faults]
            }
        }
        router.delete("faults") { _, _ in
            store.serverAPIRecords.clearFaults()
            return DevAppStoreAPI.json(["faults": [DevFault]()])
        }
        let inApps = router.group("inApps").add(middleware: DevServerAPIAuthentication(store: store))
        inApps.put("v2/transactions/consumption/:transactionId", use: sendConsumption)
        inApps.get("v2/history/:transactionId", use: transactionHistory)
        inApps.get("v2/refund/lookup/:transactionId", use: refundHistory)
        inApps.get("v1/lookup/:orderId", use: lookUpOrder)
        inApps.post("v1/notifications/history", use: notificationHistory)
    }

    // MARK: Endpoints

    /// `PUT /inApps/v2/transactions/consumption/{transactionId}` (Send Consumption Information): 202 and an empty body.
    @Sendable func sendConsumption(_ request: Request, context: BasicRequestContext) async throws -> Response {
        await Self.apple {
            let id = try Self.transactionId(context)
            let bytes = try? await request.body.collect(upTo: 64 * 1024)
            guard let transaction = store.transaction(id) else { throw DevAppleAPIError.transactionIdNotFound }
            let body = try DevConsumptionValidation.validate(
                Data((bytes ?? ByteBuffer()).readableBytesView), subscription: transaction.type == .autoRenewableSubscription)
            store.serverAPIRecords.record(DevConsumptionAnswer(transactionId: id, receivedAt: store.now, body: body))
            return Response(status: .accepted)
        }
    }

    /// `GET /inApps/v2/history/{transactionId}` (Get Transaction History): the customer's transactions, in the order
    /// minted (`sort=DESCENDING`: newest first), filtered by `productType`, `productId`, `subscriptionGroupIdentifier`,
    /// `inAppOwnershipType`, `revoked`, `startDate`/`endDate` (purchase date, milliseconds), paged by `revision`.
    @Sendable func transactionHistory(_ request: Request, context: BasicRequestContext) async throws -> Response {
        await Self.apple {
            let id = try Self.transactionId(context)
            guard var transactions = store.customerTransactions(of: id) else { throw DevAppleAPIError.transactionIdNotFound }
            let query = request.uri.queryParameters
            let productTypes: [String: AppStoreProductType] = [
                "AUTO_RENEWABLE": .autoRenewableSubscription, "NON_RENEWABLE": .nonRenewingSubscription, "CONSUMABLE": .consumable,
                "NON_CONSUMABLE": .nonConsumable,
            ]
            let types = try query.getAll("productType").map { name in
                guard let type = productTypes[name] else { throw DevAppleAPIError.invalid(4000022, "Invalid product type.") }
                return type
            }
            if !types.isEmpty { transactions = transactions.filter { types.contains($0.type) } }
            let productIds = query.getAll("productId")
            if !productIds.isEmpty { transactions = transactions.filter { productIds.contains($0.productId) } }
            let groups = query.getAll("subscriptionGroupIdentifier")
            if !groups.isEmpty { transactions = transactions.filter { $0.subscriptionGroupIdentifier.map(groups.contains) ?? false } }
            if let ownership = query.get("inAppOwnershipType") {
                guard ["PURCHASED", "FAMILY_SHARED"].contains(ownership) else {
                    throw DevAppleAPIError.invalid(4000026, "Invalid in-app ownership type.")
                }
                transactions = transactions.filter { $0.inAppOwnershipType.rawValue == ownership }
            }
            if let revoked = query.get("revoked") {
                guard let only = Bool(revoked) else { throw DevAppleAPIError.invalid(4000030, "Invalid revoked.") }
                transactions = transactions.filter { ($0.revocationDate != nil) == only }
            }
            let start = try Self.milliseconds(query.get("startDate"), DevAppleAPIError.invalid(4000015, "Invalid start date."))
            let end = try Self.milliseconds(query.get("endDate"), DevAppleAPIError.invalid(4000016, "Invalid end date."))
            if let start, let end, start >= end { throw DevAppleAPIError.invalid(4000013, "Start date after end date.") }
            transactions = transactions.filter { transaction in
                let purchased = AppStoreJSON.milliseconds(transaction.purchaseDate)
                return purchased >= (start ?? .min) && purchased < (end ?? .max)
            }
            switch query.get("sort") ?? "ASCENDING" {
            case "ASCENDING": break
            case "DESCENDING": transactions.reverse()
            default: throw DevAppleAPIError.invalid(4000021, "Invalid sort.")
            }
            let page = try Self.page(of: transactions, token: query.get("revision"), invalid: .invalid(4000005, "Invalid request revision."))
            return DevAppStoreAPI.json(
                HistoryAnswer(
                    revision: page.next, hasMore: page.hasMore, bundleId: store.configuration.bundleId,
                    appAppleId: store.configuration.appAppleId, environment: store.configuration.environment.rawValue,
                    signedTransactions: try page.records.map { try store.signedTransaction($0.transactionId) }))
        }
    }

    /// `GET /inApps/v2/refund/lookup/{transactionId}` (Get Refund History): the customer's refunded transactions, in the
    /// order minted, paged by `revision`.
    @Sendable func refundHistory(_ request: Request, context: BasicRequestContext) async throws -> Response {
        await Self.apple {
            let id = try Self.transactionId(context)
            guard let transactions = store.customerTransactions(of: id) else { throw DevAppleAPIError.transactionIdNotFound }
            let page = try Self.page(
                of: transactions.filter(DevAppStore.isRefunded), token: request.uri.queryParameters.get("revision"),
                invalid: .invalid(4000005, "Invalid request revision."))
            return DevAppStoreAPI.json(
                RefundHistoryAnswer(
                    signedTransactions: try page.records.map { try store.signedTransaction($0.transactionId) }, revision: page.next,
                    hasMore: page.hasMore))
        }
    }

    /// `GET /inApps/v1/lookup/{orderId}` (Look Up Order ID): `{status: 0, signedTransactions}`, or `{status: 1,
    /// signedTransactions: []}` for an order id the store never issued.
    @Sendable func lookUpOrder(_ request: Request, context: BasicRequestContext) async throws -> Response {
        await Self.apple {
            let transactions = store.transactions(inOrder: context.parameters.get("orderId") ?? "")
            return DevAppStoreAPI.json(
                OrderLookupAnswer(
                    status: transactions.isEmpty ? 1 : 0, signedTransactions: try transactions.map { try store.signedTransaction($0.transactionId) }))
        }
    }

    /// `POST /inApps/v1/notifications/history?paginationToken=` (Get Notification History): the body is
    /// `{startDate, endDate, notificationType?, notificationSubtype?, onlyFailures?, transactionId?}` (dates in
    /// milliseconds, both required, at most 180 days back; `transactionId` or a type, not both).
    @Sendable func notificationHistory(_ request: Request, context: BasicRequestContext) async throws -> Response {
        await Self.apple {
            let bytes = try? await request.body.collect(upTo: 64 * 1024)
            let body = try DevJSONObject(Data((bytes ?? ByteBuffer()).readableBytesView))
            guard case .number(let startValue)? = body["startDate"], let start = Int64(exactly: startValue) else {
                throw DevAppleAPIError.invalid(4000015, "Invalid start date.")
            }
            guard case .number(let endValue)? = body["endDate"], let end = Int64(exactly: endValue) else {
                throw DevAppleAPIError.invalid(4000016, "Invalid end date.")
            }
            guard start < end else { throw DevAppleAPIError.invalid(4000013, "Start date after end date.") }
            let now = AppStoreJSON.milliseconds(store.now)
            guard start >= now - 180 * 86_400_000 else { throw DevAppleAPIError.invalid(4000012, "Start date too far in past.") }
            let type = try body.optionalString("notificationType", or: .invalid(4000018, "Invalid notification type."))
            let subtype = try body.optionalString("notificationSubtype", or: .invalid(4000018, "Invalid notification type."))
            let transactionId = try body.optionalString("transactionId", or: .invalidTransactionId)
            if let transactionId, !Self.isTransactionId(transactionId) { throw DevAppleAPIError.invalidTransactionId }
            if transactionId != nil, type != nil || subtype != nil { throw DevAppleAPIError.invalid(4000019, "Multiple filters supplied.") }
            var onlyFailures = false
            switch body["onlyFailures"] {
            case nil, .null?: break
            case .bool(let value)?: onlyFailures = value
            default: throw DevAppleAPIError.generalBadRequest("onlyFailures is not a boolean.")
            }
            let items = store.notificationHistory(
                from: Date(timeIntervalSince1970: Double(start) / 1000), to: Date(timeIntervalSince1970: Double(end) / 1000), type: type,
                subtype: subtype, transactionId: transactionId, onlyFailures: onlyFailures)
            let page = try Self.page(
                of: items, token: request.uri.queryParameters.get("paginationToken"), invalid: .invalid(4000014, "Invalid pagination token."))
            return DevAppStoreAPI.json(
                NotificationHistoryAnswer(notificationHistory: page.records, hasMore: page.hasMore, paginationToken: page.hasMore ? page.next : nil))
        }
    }

    // MARK: Helpers

    /// Runs `make`, answering its ``DevAppleAPIError`` (or any other failure, as Apple's general internal error).
    static func apple(_ make: () async throws -> Response) async -> Response {
        do {
            return try await make()
        } catch let error as DevAppleAPIError {
            return error.response
        } catch {
            return DevAppleAPIError(status: 500, errorCode: 5000000, errorMessage: "An unknown error occurred.").response
        }
    }

    /// Whether `id` is a transaction id as Apple writes them (digits).
    static func isTransactionId(_ id: String) -> Bool {
        !id.isEmpty && id.count <= 20 && id.allSatisfy { $0.isASCII && $0.isNumber }
    }

    /// The path's `transactionId`, which must be digits (else Apple's InvalidTransactionIdError).
    static func transactionId(_ context: BasicRequestContext) throws -> String {
        let id = context.parameters.get("transactionId") ?? ""
        guard isTransactionId(id) else { throw DevAppleAPIError.invalidTransactionId }
        return id
    }

    /// A query parameter in milliseconds since 1970 (nil when absent; `invalid` when not a number).
    static func milliseconds(_ value: String?, _ invalid: DevAppleAPIError) throws -> Int64? {
        guard let value else { return nil }
        guard let milliseconds = Int64(value), milliseconds >= 0 else { throw invalid }
        return milliseconds
    }

    /// One page of `records` from the one `token` names (the first without one), with the token of the next.
    static func page<Record>(
        of records: [Record], token: String?, invalid: DevAppleAPIError
    ) throws -> (records: [Record], hasMore: Bool, next: String) {
        var offset = 0
        if let token {
            guard let data = Base64URL.decode(token), let text = String(data: data, encoding: .utf8),
                text.hasPrefix("dev-appstore:"), let value = Int(text.dropFirst("dev-appstore:".count)), value >= 0
            else { throw invalid }
            offset = min(value, records.count)
        }
        let end = min(offset + pageSize, records.count)
        return (Array(records[offset..<end]), end < records.count, Base64URL.encode(Data("dev-appstore:\(end)".utf8)))
    }

    // MARK: Bodies and answers

    /// `GET /server-api-key`.
    struct KeyAnswer: Encodable {
        var keyId: String
        var issuerId: String
        var privateKeyPEM: String
    }

    /// `GET /server-api-rejections`.
    struct RejectionsAnswer: Encodable {
        var count: Int
        var rejections: [DevServerAPIRejection]
    }

    /// `POST /faults`.
    struct FaultBody: Decodable {
        var path: String
        var status: Int
        var count: Int?
        var retryAfter: Int?
        var errorCode: Int64?
    }

    /// Apple's `HistoryResponse`.
    struct HistoryAnswer: Encodable {
        var revision: String
        var hasMore: Bool
        var bundleId: String
        var appAppleId: Int64?
        var environment: String
        var signedTransactions: [String]
    }

    /// Apple's `RefundHistoryResponse`.
    struct RefundHistoryAnswer: Encodable {
        var signedTransactions: [String]
        var revision: String
        var hasMore: Bool
    }

    /// Apple's `OrderLookupResponse`.
    struct OrderLookupAnswer: Encodable {
        var status: Int
        var signedTransactions: [String]
    }

    /// Apple's `NotificationHistoryResponse`.
    struct NotificationHistoryAnswer: Encodable {
        var notificationHistory: [DevNotificationHistoryItem]
        var hasMore: Bool
        var paginationToken: String?
    }
}
