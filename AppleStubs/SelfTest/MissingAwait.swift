// A deliberately wrong call, which scripts/apple-typecheck must refuse: an async StoreKit call without `await`.
// expect: expression is 'async' but is not marked with 'await'
#if canImport(StoreKit)
import StoreKit

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
func selfTestMissingAwait() async throws {
    try AppStore.sync()
}
#endif
