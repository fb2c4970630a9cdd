import TallyAppStore
import Testing

@Suite("App Store environments")
struct AppStoreEnvironmentTests {
    @Test("Only Production and Sandbox are environments a server can accept; Xcode and LocalTesting are not")
    func environments() {
        #expect(AppStoreEnvironment(rawValue: "Production") == .production)
        #expect(AppStoreEnvironment(rawValue: "Sandbox") == .sandbox)
        #expect(AppStoreEnvironment(rawValue: "Xcode") == nil && AppStoreEnvironment(rawValue: "LocalTesting") == nil)
    }
}
