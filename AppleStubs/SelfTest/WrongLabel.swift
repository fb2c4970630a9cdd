// A deliberately wrong call, which scripts/apple-typecheck must refuse: `purchase(options:)` called with a wrong label.
// expect: incorrect argument label in call
#if canImport(StoreKit)
import StoreKit

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
func selfTestWrongLabel(_ product: Product) async throws {
    _ = try await product.purchase(option: [])
}
#endif
