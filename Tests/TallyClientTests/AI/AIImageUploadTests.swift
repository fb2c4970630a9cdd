import Foundation
import TallyAPI
import TallyClient
import TallyTestSupport
import Testing

/// The pure parts of the Apple-only image and video layers: the size a picture is redrawn at before upload, and
/// which frames of a clip are sent and how many fit a budget.
@Suite("AI images: upload size, video frame times, frames for a budget", .timeLimit(.minutes(1)))
struct AIImageUploadTests {
    static let tiles = AIImageRule()
    static let patches = AIImageRule(sizing: .patches(patchSize: 32, maxPatches: 1536, multiplier: 1.62), lowDetailTokens: nil)

    @Test("A picture is redrawn at the size the model sees, never larger than it is", arguments: [
        (4096, 4096, 768, 768), (1024, 1024, 768, 768), (2048, 768, 2048, 768), (3000, 2000, 1152, 768), (64, 64, 64, 64),
        (1, 10_000, 1, 2048), (10_000, 1, 2048, 1), (768, 5000, 315, 2048), (0, 0, 1, 1), (-5, 10, 1, 10),
    ])
    func tileSizes(width: Int, height: Int, expectedWidth: Int, expectedHeight: Int) {
        let plan = AIImageUpload.plan(width: width, height: height, rule: Self.tiles)
        #expect(plan.width == expectedWidth && plan.height == expectedHeight && plan.quality == 0.8)
    }

    @Test("Downscaling cuts pixels, never the price: tiles cost the same, patches no more; nothing is upscaled")
    func priceUnchanged() {
        var random = SplitMix64(seed: 4_404)
        let sides = [1, 2, 511, 512, 513, 767, 768, 769, 2047, 2048, 2049, 10_000]
        let pairs = sides.flatMap { w in sides.map { (w, $0) } } + (0..<3_000).map { _ in (Int(random.next() % 12_000) + 1, Int(random.next() % 12_000) + 1) }
        for (w, h) in pairs {
            let tile = AIImageUpload.plan(width: w, height: h, rule: Self.tiles)
            #expect(tile.width <= w && tile.height <= h && max(tile.width, tile.height) <= 2048 && min(tile.width, tile.height) <= 768, "\(w)×\(h)")
            for detail in ImageDetail.allCases {
                #expect(Self.tiles.tokens(width: tile.width, height: tile.height, detail: detail) == Self.tiles.tokens(width: w, height: h, detail: detail), "\(w)×\(h)")
            }
            let patch = AIImageUpload.plan(width: w, height: h, rule: Self.patches)
            #expect(patch.width <= w && patch.height <= h, "\(w)×\(h)")
            #expect(Self.patches.tokens(width: patch.width, height: patch.height, detail: .high) <= Self.patches.tokens(width: w, height: h, detail: .high))
            #expect((patch.width + 31) / 32 * ((patch.height + 31) / 32) <= 1536, "\(w)×\(h) → \(patch.width)×\(patch.height)")
        }
        // A patch-priced model sees a 1×10000 strip whole (313 patches, under the cap): nothing to cut.
        let strip = AIImageUpload.plan(width: 1, height: 10_000, rule: Self.patches)
        #expect(strip.width == 1 && strip.height == 10_000)
    }

    @Test("Frames are taken from the middle of equal segments", arguments: [
        (9.0, 3, 8, [1.5, 4.5, 7.5]), (10.0, 1, 8, [5.0]), (10.0, 0, 8, [5.0]), (10.0, -4, 8, [5.0]), (4.0, 4, 8, [0.5, 1.5, 2.5, 3.5]),
        (8.0, 20, 2, [2.0, 6.0]), (8.0, 3, 0, [4.0]), (0.0, 5, 8, [0.0]), (-3.0, 5, 8, [0.0]), (.nan, 2, 8, [0.0]), (.infinity, 2, 8, [0.0]),
    ])
    func frameTimes(duration: Double, count: Int, maxPerRequest: Int, expected: [Double]) {
        #expect(VideoFrames.times(duration: duration, count: count, maxPerRequest: maxPerRequest) == expected)
    }

    @Test("Every frame time lies in its own segment, before the end; the count is clamped to 1...maxPerRequest")
    func frameTimesProperties() {
        var random = SplitMix64(seed: 44)
        for _ in 0..<20_000 {
            let duration = [1e-9, 0.04, 1, 3_600 * 3][Int(random.next() % 4)] * (Double(random.next() % 1000) + 1) / 1000
            let count = Int(random.next() % 40) - 5, limit = Int(random.next() % 16)
            let times = VideoFrames.times(duration: duration, count: count, maxPerRequest: limit)
            #expect(times.count == min(max(count, 1), max(limit, 1)), "\(duration) \(count) \(limit)")
            for (index, time) in times.enumerated() {
                let segment = duration / Double(times.count)
                #expect(time >= 0 && time < duration && time >= segment * Double(index) && time < segment * Double(index + 1), "\(duration) \(index)")
            }
        }
    }

    @Test("The frames for a budget are the most whose tokens fit, within the model's limit")
    func framesForBudget() {
        let vision = AIModelSpec(name: "vision", promptTokensPerCredit: 1000, completionTokensPerCredit: 250, maxCompletionTokens: 1024, images: Self.tiles)
        // 1920×1080 is seen at 1366×768: 3 × 2 tiles, 85 + 6 × 170 = 1105 tokens a frame.
        #expect(Self.tiles.tokens(width: 1920, height: 1080, detail: .high) == 1105)
        let table: [(budget: Int, detail: ImageDetail, frames: Int)] = [
            (0, .high, 0), (-50, .high, 0), (1104, .high, 0), (1105, .high, 1), (5000, .high, 4), (5525, .auto, 5), (1_000_000, .high, 8),
            (84, .low, 0), (85, .low, 1), (600, .low, 7), (5000, .low, 8),
        ]
        for row in table {
            #expect(VideoFrames.frameCount(budget: row.budget, model: vision, width: 1920, height: 1080, detail: row.detail) == row.frames, "\(row)")
        }
        let text = AIModelSpec(name: "chat", promptTokensPerCredit: 1000, completionTokensPerCredit: 250, maxCompletionTokens: 1024)
        #expect(VideoFrames.frameCount(budget: 1_000_000, model: text, width: 64, height: 64, detail: .low) == 0)
        var random = SplitMix64(seed: 7)
        for _ in 0..<5_000 {
            let (budget, w, h) = (Int(random.next() % 20_000), Int(random.next() % 5000) + 1, Int(random.next() % 5000) + 1)
            let frames = VideoFrames.frameCount(budget: budget, model: vision, width: w, height: h, detail: .high)
            let each = Self.tiles.tokens(width: w, height: h, detail: .high)
            #expect(frames * each <= budget && (frames == 8 || (frames + 1) * each > budget), "\(budget) \(w)×\(h)")
        }
    }
}
