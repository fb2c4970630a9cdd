// A deliberately wrong call, which scripts/apple-typecheck must refuse: a non-Sendable StoreKit-side value sent to a
// task while the caller keeps using it (caught on SIL, which is why the script does not stop at -typecheck).
// expect: risks causing data races
#if canImport(StoreKit)
import StoreKit

final class SelfTestCart {
    var products: [Product] = []
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
func selfTestDataRace() async {
    let cart = SelfTestCart()
    Task { cart.products = try await Product.products(for: ["x"]) }
    cart.products = []
}
#endif
