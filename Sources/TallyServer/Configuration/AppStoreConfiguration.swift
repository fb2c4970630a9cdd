import Foundation
import TallyAppStore
import TallyStore

/// App Store purchases (the configuration file's `appStore:` section): which app's signed transactions and
/// notifications are accepted, from which environments, signed by a chain ending at which roots, and what each
/// product gives. Absent: no purchase routes.
///
/// ```yaml
/// appStore:
///   bundleId: com.example.oracle
///   appAppleId: 1234567890
///   environments: [Production, Sandbox]
///   sandbox: {tokensPerAccount: 1000}
///   products:
///     - {productId: com.example.tokens.100, tokens: 100}
///     - {productId: com.example.premium.monthly, premium: true}
/// ```
public struct AppStoreConfiguration: Sendable {
    /// The app's bundle id: a payload naming another is refused (`wrong_bundle`).
    public var bundleId: String
    /// The app's Apple id (App Store Connect): required to accept Production notifications, which carry it.
    public var appAppleId: Int64?
    /// The environments whose signed payloads are accepted (App Review buys in Sandbox against a production server).
    public var environments: [AppStoreEnvironment]
    /// The most tokens Sandbox consumables credit one account in all (App Review's and testers' purchases, which cost
    /// nothing); beyond it a Sandbox consumable is refused (`sandbox_limit`). 0: Sandbox consumables credit nothing.
    public var sandboxTokensPerAccount: Int64
    /// The roots a payload's chain must end at, as DER; empty: Apple Root CA - G3, built in.
    public var rootCertificates: [Data]
    /// The files the roots were read from (for the effective configuration), in order.
    public var rootCertificateFiles: [String]
    /// What each product gives.
    public var products: [AppStoreProduct]
    /// Whether certificates are checked for revocation online (OCSP): not supported yet, so always false (the file's
    /// `onlineChecks: true` is refused).
    public var onlineChecks: Bool
    /// Verifies signed payloads for this app, environments and roots (made once: the roots are parsed here).
    public let verifier: AppStoreVerifier
    /// The App Store Server API (`serverAPI:`): consumption answers, reconciliation; nil when not configured.
    public var serverAPI: AppStoreServerAPISettings?
    /// How consumption requests are answered (`consumption:`).
    public var consumption = ConsumptionPolicy()
    /// `consumption.sampleContentProvided` as written: nil decides it from what the configuration gives for free.
    public var sampleContentProvided: Bool?
    /// The offers the server signs (`offers:`; needs `serverAPI`, whose key signs them).
    public var offers: [AppStoreOffer] = []

    /// The default of ``sandboxTokensPerAccount``: enough for App Review and a tester to buy each pack a few times.
    public static let defaultSandboxTokensPerAccount: Int64 = 1_000

    /// A configuration for `bundleId` accepting `environments`, signed under `rootCertificates` (DER or PEM; empty:
    /// Apple Root CA - G3), selling `products`. Throws ``ConfigurationError`` when a root is not a certificate.
    public init(
        bundleId: String, appAppleId: Int64? = nil, environments: [AppStoreEnvironment] = [.production, .sandbox],
        sandboxTokensPerAccount: Int64 = defaultSandboxTokensPerAccount, rootCertificates: [Data] = [],
        rootCertificateFiles: [String] = [], products: [AppStoreProduct], onlineChecks: Bool = false
    ) throws {
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.environments = environments
        self.sandboxTokensPerAccount = sandboxTokensPerAccount
        self.rootCertificates = rootCertificates
        self.rootCertificateFiles = rootCertificateFiles
        self.products = products
        self.onlineChecks = onlineChecks
        do {
            verifier = try AppStoreVerifier(
                rootCertificates: rootCertificates.isEmpty ? nil : rootCertificates.map { Array($0) }, bundleId: bundleId,
                appAppleId: appAppleId, environments: Set(environments))
        } catch {
            throw ConfigurationError("appStore.rootCertificates: \(error)")
        }
    }

    /// The product `productId`, if the configuration sells it.
    public func product(_ productId: String) -> AppStoreProduct? { products.first { $0.productId == productId } }

    /// The `appStore:` section as written.
    struct File: Codable, Equatable {
        var bundleId: String
        var appAppleId: Int64?
        var environments: [String]?
        var sandbox: Sandbox?
        var rootCertificates: [String]?
        var products: [Product]
        var onlineChecks: Bool?
        var serverAPI: AppStoreServerAPISettings.File?
        var consumption: ConsumptionPolicyFile?
        var offers: [AppStoreOffer.File]?

        /// `{productId: com.example.tokens.100, tokens: 100}` or `{productId: com.example.premium.monthly, premium: true}`.
        struct Product: Codable, Equatable {
            var productId: String
            var tokens: Int64?
            var premium: Bool?
        }

        /// `{tokensPerAccount: 1000}`: what Sandbox purchases may credit.
        struct Sandbox: Codable, Equatable {
            var tokensPerAccount: Int64?
        }

        /// The section that gives exactly `configuration` (its roots by the files they were read from).
        init(effective configuration: AppStoreConfiguration) {
            bundleId = configuration.bundleId
            appAppleId = configuration.appAppleId
            environments = configuration.environments.map(\.rawValue)
            sandbox = Sandbox(tokensPerAccount: configuration.sandboxTokensPerAccount)
            rootCertificates = configuration.rootCertificateFiles.isEmpty ? nil : configuration.rootCertificateFiles
            products = configuration.products.map { product in
                switch product.grant {
                case .tokens(let tokens): Product(productId: product.productId, tokens: tokens, premium: nil)
                case .premium: Product(productId: product.productId, tokens: nil, premium: true)
                }
            }
            onlineChecks = configuration.onlineChecks
            serverAPI = configuration.serverAPI.map(AppStoreServerAPISettings.File.init(effective:))
            consumption =
                configuration.consumption == ConsumptionPolicy() && configuration.sampleContentProvided == nil
                ? nil : ConsumptionPolicyFile(effective: configuration.consumption, sampleContentProvided: configuration.sampleContentProvided)
            offers = configuration.offers.isEmpty ? nil : configuration.offers.map(AppStoreOffer.File.init(effective:))
        }

        /// The configuration, its root files read relative to `directory` (the configuration file's).
        func configuration(directory: URL?, environment: [String: String]) throws -> AppStoreConfiguration {
            guard Self.isBundleId(bundleId) else {
                throw ConfigurationError("appStore.bundleId must be a bundle id such as com.example.app, found \"\(bundleId)\"")
            }
            if let appAppleId, appAppleId <= 0 { throw ConfigurationError("appStore.appAppleId must be a positive number") }
            var accepted: [AppStoreEnvironment] = []
            for name in environments ?? ["Production", "Sandbox"] {
                guard let environment = AppStoreEnvironment(rawValue: name) else {
                    throw ConfigurationError("appStore.environments: \"\(name)\" is not Production or Sandbox")
                }
                if !accepted.contains(environment) { accepted.append(environment) }
            }
            guard !accepted.isEmpty else { throw ConfigurationError("appStore.environments must name Production, Sandbox or both") }
            if accepted.contains(.production), appAppleId == nil {
                throw ConfigurationError("appStore.appAppleId is required to accept Production (App Store Connect shows it)")
            }
            let sandboxTokens = sandbox?.tokensPerAccount ?? AppStoreConfiguration.defaultSandboxTokensPerAccount
            guard (0...Limits.maxAmount).contains(sandboxTokens) else {
                throw ConfigurationError("appStore.sandbox.tokensPerAccount must be between 0 (no Sandbox credits) and \(Limits.maxAmount)")
            }
            let roots = try ConfigurationChecks.readFiles(rootCertificates ?? [], relativeTo: directory, place: "appStore.rootCertificates")
            guard !products.isEmpty else { throw ConfigurationError("appStore.products must list at least one product") }
            guard onlineChecks != true else {
                // Refused rather than silently off: an operator who asks for revocation checks must know there are none.
                throw ConfigurationError("appStore.onlineChecks: true is not supported yet (OCSP); payloads are verified offline at their signedDate")
            }
            var seen: Set<String> = []
            let products = try products.enumerated().map { index, product -> AppStoreProduct in
                let place = "appStore.products[\(index)]"
                guard !product.productId.isEmpty, product.productId.utf8.count <= 255 else {
                    throw ConfigurationError("\(place).productId must be 1 to 255 characters")
                }
                guard seen.insert(product.productId).inserted else {
                    throw ConfigurationError("\(place): productId \"\(product.productId)\" is listed twice")
                }
                switch (product.tokens, product.premium) {
                case (let tokens?, nil):
                    guard tokens > 0, tokens <= Limits.maxAmount else {
                        throw ConfigurationError("\(place).tokens must be between 1 and \(Limits.maxAmount)")
                    }
                    return AppStoreProduct(productId: product.productId, grant: .tokens(tokens))
                case (nil, true?):
                    return AppStoreProduct(productId: product.productId, grant: .premium)
                default:
                    throw ConfigurationError("\(place) needs either tokens: N (a consumable) or premium: true (a subscription)")
                }
            }
            var configuration = try AppStoreConfiguration(
                bundleId: bundleId, appAppleId: appAppleId, environments: accepted, sandboxTokensPerAccount: sandboxTokens,
                rootCertificates: roots,
                rootCertificateFiles: rootCertificates ?? [], products: products, onlineChecks: onlineChecks ?? false)
            configuration.serverAPI = try serverAPI?.settings(bundleId: bundleId, environment: environment)
            configuration.consumption = try consumption?.policy() ?? ConsumptionPolicy()
            configuration.sampleContentProvided = consumption?.sampleContentProvided
            configuration.offers = try (offers ?? []).enumerated().map { try $1.offer(index: $0, products: products) }
            if !configuration.offers.isEmpty, configuration.serverAPI == nil {
                throw ConfigurationError("appStore.offers need appStore.serverAPI: its In-App Purchase key signs them")
            }
            return configuration
        }

        /// Reverse-DNS: letters, digits, `-` and `.`, with at least one dot.
        static func isBundleId(_ text: String) -> Bool {
            !text.isEmpty && text.utf8.count <= 155 && text.contains(".")
                && text.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) && $0.isASCII || $0 == "." || $0 == "-" }
        }
    }
}

/// A product the app sells on the App Store, and what a purchase of it gives.
public struct AppStoreProduct: Sendable, Hashable {
    /// What a purchase gives.
    public enum Grant: Sendable, Hashable {
        /// A consumable: this many tokens × the transaction's quantity.
        case tokens(Int64)
        /// An auto-renewable subscription: premium while it is active.
        case premium
    }

    /// The App Store product id.
    public var productId: String
    /// What a purchase gives.
    public var grant: Grant

    /// A product.
    public init(productId: String, grant: Grant) {
        self.productId = productId
        self.grant = grant
    }
}
