import Foundation
import TallyDevAppStore
import TallyStore

/// TallyStore's manual clock drives the local App Store (the requirements are the same), so a test moves the server's
/// and the stand-in's time together.
extension ManualClock: DevAppStoreClock {}

/// The products the purchase tests sell: 100 tokens, and a monthly premium plan.
public enum TestProducts {
    /// The bundle id of the app the stand-in signs for.
    public static let bundleId = "com.example.oracle"
    /// A consumable: 100 tokens.
    public static let tokens100 = "com.example.tokens.100"
    /// An auto-renewable subscription: premium.
    public static let premiumMonthly = "com.example.premium.monthly"

    /// A local App Store on `clock` signing with a CA of its own, for the Sandbox, that knows the products' types.
    public static func appStore(clock: ManualClock, configure: (inout DevAppStore.Configuration) -> Void = { _ in }) throws -> DevAppStore {
        var configuration = DevAppStore.Configuration()
        configuration.bundleId = bundleId
        configuration.environment = .sandbox
        configuration.productTypes = [premiumMonthly: .autoRenewableSubscription]
        configure(&configuration)
        return DevAppStore(configuration: configuration, authority: try DevCertificateAuthority.generate(now: clock.now), clock: clock)
    }
}
