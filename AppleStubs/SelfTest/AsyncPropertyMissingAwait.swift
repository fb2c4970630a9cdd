// A deliberately wrong call, which scripts/apple-typecheck must refuse: AVFoundation's async `load(_:)` of an
// asset's `.duration` without `await`.
// expect: expression is 'async' but is not marked with 'await'
#if canImport(AVFoundation)
import AVFoundation

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, *)
func selfTestLoadWithoutAwait(_ asset: AVURLAsset) async throws -> Double {
    try asset.load(.duration).seconds
}
#endif
