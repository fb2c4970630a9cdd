// Stub of Apple's StoreKit 2, for scripts/apple-typecheck only: the declarations the SDK and the examples use, with the
// signatures, isolation, Sendable conformances and availability Apple documents. Nothing here runs.
@_exported import Foundation
import UIKit

/// https://developer.apple.com/documentation/storekit/verificationresult
@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
@frozen
public enum VerificationResult<SignedType> {
    /// https://developer.apple.com/documentation/storekit/verificationresult/verificationerror
    public enum VerificationError: Error, Sendable {
        case revokedCertificate, invalidCertificateChain, invalidDeviceVerification, invalidEncoding, invalidSignature,
            missingRequiredProperties
    }

    case unverified(SignedType, VerificationResult<SignedType>.VerificationError)
    case verified(SignedType)

    /// https://developer.apple.com/documentation/storekit/verificationresult/jwsrepresentation-21vgo
    public var jwsRepresentation: String { fatalError("stub") }
    /// https://developer.apple.com/documentation/storekit/verificationresult/unsafepayloadvalue
    public var unsafePayloadValue: SignedType { fatalError("stub") }
    /// https://developer.apple.com/documentation/storekit/verificationresult/payloadvalue
    public var payloadValue: SignedType { get throws { fatalError("stub") } }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
extension VerificationResult: Sendable where SignedType: Sendable {}

/// https://developer.apple.com/documentation/storekit/product
@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
public struct Product: Identifiable, Equatable, Hashable, Sendable {
    /// https://developer.apple.com/documentation/storekit/product/producttype
    public struct ProductType: Equatable, Hashable, RawRepresentable, Sendable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// https://developer.apple.com/documentation/storekit/product/producttype/consumable
        public static let consumable = ProductType(rawValue: "Consumable")
        /// https://developer.apple.com/documentation/storekit/product/producttype/nonconsumable
        public static let nonConsumable = ProductType(rawValue: "Non-Consumable")
        /// https://developer.apple.com/documentation/storekit/product/producttype/nonrenewable
        public static let nonRenewable = ProductType(rawValue: "Non-Renewable")
        /// https://developer.apple.com/documentation/storekit/product/producttype/autorenewable
        public static let autoRenewable = ProductType(rawValue: "Auto-Renewable Subscription")
    }

    /// https://developer.apple.com/documentation/storekit/product/purchaseoption
    public struct PurchaseOption: Equatable, Hashable, Sendable {
        /// https://developer.apple.com/documentation/storekit/product/purchaseoption/appaccounttoken(_:)
        public static func appAccountToken(_ token: UUID) -> Product.PurchaseOption { fatalError("stub") }
        /// https://developer.apple.com/documentation/storekit/product/purchaseoption/quantity(_:)
        public static func quantity(_ quantity: Int) -> Product.PurchaseOption { fatalError("stub") }
        /// https://developer.apple.com/documentation/storekit/product/purchaseoption/promotionaloffer(_:compactjws:)
        /// (back-deployed to iOS 15 from iOS 18.4).
        public static func promotionalOffer(_ offerID: String, compactJWS: String) -> Product.PurchaseOption { fatalError("stub") }
        /// https://developer.apple.com/documentation/storekit/product/purchaseoption/introductoryoffereligibility(compactjws:)
        /// (back-deployed to iOS 15 from iOS 18.4).
        public static func introductoryOfferEligibility(compactJWS: String) -> Product.PurchaseOption { fatalError("stub") }
    }

    /// https://developer.apple.com/documentation/storekit/product/purchaseresult
    public enum PurchaseResult: Equatable, Sendable {
        case success(VerificationResult<Transaction>)
        case userCancelled
        case pending
        public static func == (lhs: Self, rhs: Self) -> Bool { fatalError("stub") }
    }

    /// https://developer.apple.com/documentation/storekit/product/id
    public let id: String
    /// https://developer.apple.com/documentation/storekit/product/type
    public let type: Product.ProductType
    /// https://developer.apple.com/documentation/storekit/product/displayname
    public let displayName: String
    /// https://developer.apple.com/documentation/storekit/product/description
    public let description: String
    /// https://developer.apple.com/documentation/storekit/product/price
    public let price: Decimal
    /// https://developer.apple.com/documentation/storekit/product/displayprice
    public let displayPrice: String

    /// https://developer.apple.com/documentation/storekit/product/products(for:)
    /// `static func products<Identifiers>(for identifiers: Identifiers) async throws -> [Product]
    ///     where Identifiers : Collection, Identifiers.Element == String`
    public static func products<Identifiers>(for identifiers: Identifiers) async throws -> [Product]
    where Identifiers: Collection, Identifiers.Element == String { fatalError("stub") }

    /// https://developer.apple.com/documentation/storekit/product/purchase(options:)
    /// Unavailable on visionOS, where `purchase(confirmIn:options:)` is the call.
    @available(visionOS, unavailable)
    public func purchase(options: Set<Product.PurchaseOption> = []) async throws -> Product.PurchaseResult { fatalError("stub") }

    /// https://developer.apple.com/documentation/storekit/product/purchase(confirmin:options:)-3bivf (iOS 17, visionOS 1)
    @available(iOS 17.0, macCatalyst 17.0, tvOS 17.0, visionOS 1.0, *)
    @available(macOS, unavailable)
    @available(watchOS, unavailable)
    @MainActor
    public func purchase(confirmIn scene: UIScene, options: Set<Product.PurchaseOption> = []) async throws -> Product.PurchaseResult {
        fatalError("stub")
    }
}

/// https://developer.apple.com/documentation/storekit/transaction
@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
public struct Transaction: Identifiable, Equatable, Hashable, Sendable {
    /// https://developer.apple.com/documentation/storekit/transaction/transactions
    /// An async sequence of transactions that never throws.
    public struct Transactions: AsyncSequence, Sendable {
        public typealias Element = VerificationResult<Transaction>
        public struct AsyncIterator: AsyncIteratorProtocol {
            public mutating func next() async -> VerificationResult<Transaction>? { fatalError("stub") }
        }
        public func makeAsyncIterator() -> AsyncIterator { fatalError("stub") }
    }

    /// https://developer.apple.com/documentation/storekit/transaction/id
    public let id: UInt64
    /// https://developer.apple.com/documentation/storekit/transaction/originalid
    public let originalID: UInt64
    /// https://developer.apple.com/documentation/storekit/transaction/productid
    public let productID: String
    /// https://developer.apple.com/documentation/storekit/transaction/producttype
    public let productType: Product.ProductType
    /// https://developer.apple.com/documentation/storekit/transaction/appaccounttoken
    public let appAccountToken: UUID?
    /// https://developer.apple.com/documentation/storekit/transaction/purchasedate
    public let purchaseDate: Date
    /// https://developer.apple.com/documentation/storekit/transaction/expirationdate
    public let expirationDate: Date?
    /// https://developer.apple.com/documentation/storekit/transaction/revocationdate
    public let revocationDate: Date?

    /// https://developer.apple.com/documentation/storekit/transaction/finish()
    public func finish() async {}

    /// https://developer.apple.com/documentation/storekit/transaction/updates
    public static var updates: Transaction.Transactions { fatalError("stub") }
    /// https://developer.apple.com/documentation/storekit/transaction/unfinished
    public static var unfinished: Transaction.Transactions { fatalError("stub") }
    /// https://developer.apple.com/documentation/storekit/transaction/currententitlements
    public static var currentEntitlements: Transaction.Transactions { fatalError("stub") }
    /// https://developer.apple.com/documentation/storekit/transaction/all
    public static var all: Transaction.Transactions { fatalError("stub") }
}

/// https://developer.apple.com/documentation/storekit/appstore
@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
public enum AppStore {
    /// https://developer.apple.com/documentation/storekit/appstore/sync()
    /// `static func sync() async throws`: may show the App Store's sign-in; throws `StoreKitError.userCancelled`.
    public static func sync() async throws {}

    /// https://developer.apple.com/documentation/storekit/appstore/showmanagesubscriptions(in:)
    /// `@MainActor static func showManageSubscriptions(in scene: UIWindowScene) async throws` (iOS 15; not on macOS,
    /// tvOS or watchOS).
    @available(iOS 15.0, macCatalyst 15.0, visionOS 1.0, *)
    @available(macOS, unavailable)
    @available(tvOS, unavailable)
    @available(watchOS, unavailable)
    @MainActor
    public static func showManageSubscriptions(in scene: UIWindowScene) async throws {}
}
