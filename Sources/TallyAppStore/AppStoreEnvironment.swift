/// The App Store environment a signed payload names (`environment`): only the ones a server's configuration accepts
/// are taken. `Xcode` and `LocalTesting` are never accepted: Apple's own library skips verification for them.
public enum AppStoreEnvironment: String, Sendable, Hashable, Codable, CaseIterable {
    /// Real purchases.
    case production = "Production"
    /// Sandbox purchases (TestFlight, App Review, sandbox accounts).
    case sandbox = "Sandbox"
}
