import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the oracle sells on the App Store: the server's `appStore.products` (tally.yaml) says what each gives.
public enum OracleProduct {
    /// A consumable: 100 tokens.
    public static let tokens100 = "com.example.oracle.tokens100"
    /// An auto-renewable subscription: premium, unlimited readings while it runs.
    public static let premium = "com.example.oracle.premium"
    /// Everything the oracle sells, in the order the screen offers it.
    public static let all = [tokens100, premium]

    /// `products` — what the store answered for ``all`` (on iOS StoreKit's `Product.products(for:)`) — in the screen's
    /// order, each once.
    /// - Throws: a ``StorefrontError`` naming each product the store did not return: one App Store Connect (or the
    ///   scheme's StoreKit configuration file) does not have, or not yet, or a Paid Apps agreement not signed. Shown,
    ///   not hidden: a screen that silently offers nothing to buy is what App Review rejects.
    public static func ordered<P>(_ products: [P], id: (P) -> String) throws -> [P] {
        let byId = Dictionary(products.map { (id($0), $0) }, uniquingKeysWith: { first, _ in first })
        let missing = all.filter { byId[$0] == nil }
        guard missing.isEmpty else {
            throw StorefrontError(message: "The App Store has no \(missing.joined(separator: " or ")) for this app yet: nothing can be bought.")
        }
        return all.compactMap { byId[$0] }
    }
}

/// Where the app buys: the store that charges the user and hands back the signed transaction, which the session then
/// redeems on the server (`client.purchases.redeem(signedTransaction:)`).
///
/// On iOS the app buys through StoreKit 2 instead, with the SDK's `client.purchases.buy(product)` (compiled where
/// `canImport(StoreKit)`: `OracleSession.buy(_:)` in OracleStoreKit.swift): it buys with the user's id as the
/// `appAccountToken`, redeems the transaction and finishes it only once the server has it, and
/// `client.purchases.observeTransactions()` redeems what a crash left unfinished.
/// Builds without StoreKit (Linux, the tests, the command line) buy from `tally-dev dev-appstore`
/// (``DevAppStoreStorefront``), which signs exactly as the App Store does.
public protocol Storefront: Sendable {
    /// Charges the user for one `productId`, for the Tally account `appAccountToken` names; the transaction as the
    /// App Store signed it (StoreKit 2's `Transaction.jwsRepresentation`).
    func buy(productId: String, appAccountToken: UUID?) async throws -> String
}

/// The local App Store, `tally-dev dev-appstore`, over HTTP (`POST /purchase`): its transactions and notifications are
/// signed under its own root, which the server trusts through tally.yaml's `appStore.rootCertificates`.
public struct DevAppStoreStorefront: Storefront {
    /// The dev App Store's base URL (`http://127.0.0.1:8092` unless started with another `--port`).
    public let url: URL

    /// The storefront of the dev App Store at `url`.
    public init(url: URL) { self.url = url }

    public func buy(productId: String, appAccountToken: UUID?) async throws -> String {
        struct Body: Encodable {
            var productId: String
            var appAccountToken: UUID?
        }
        struct Answer: Decodable { var signedTransaction: String }
        var request = URLRequest(url: url.appendingPathComponent("purchase"))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSONEncoder().encode(Body(productId: productId, appAccountToken: appAccountToken))
        let (data, response) = try await URLSession.shared.data(for: request)
        guard (response as? HTTPURLResponse)?.statusCode == 200 else {
            throw StorefrontError(message: "the dev App Store refused the purchase: \(String(decoding: data, as: UTF8.self))")
        }
        return try JSONDecoder().decode(Answer.self, from: data).signedTransaction
    }
}

/// A purchase the store did not make.
public struct StorefrontError: Error, CustomStringConvertible {
    /// What happened.
    public let message: String
    public var description: String { message }

    /// The error saying `message` (a ``Storefront`` of the app's own throws it too).
    public init(message: String) { self.message = message }
}
