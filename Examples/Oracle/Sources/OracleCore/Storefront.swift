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
}

/// Where the app buys: the store that charges the user and hands back the signed transaction, which the session then
/// redeems on the server (`client.purchases.redeem(signedTransaction:)`).
///
/// On iOS the app buys through StoreKit 2 instead, with the SDK's `client.purchases.buy(product)` (compiled where
/// `canImport(StoreKit)`): it buys with the user's id as the `appAccountToken`, redeems the transaction and finishes it
/// only once the server has it, and `client.purchases.observeTransactions()` redeems what a crash left unfinished.
/// Builds without StoreKit (Linux, the tests, the command line) buy from `tally dev-appstore`
/// (``DevAppStoreStorefront``), which signs exactly as the App Store does.
public protocol Storefront: Sendable {
    /// Charges the user for one `productId`, for the Tally account `appAccountToken` names; the transaction as the
    /// App Store signed it (StoreKit 2's `Transaction.jwsRepresentation`).
    func buy(productId: String, appAccountToken: UUID?) async throws -> String
}

/// The local App Store, `tally dev-appstore`, over HTTP (`POST /purchase`): its transactions and notifications are
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
}
