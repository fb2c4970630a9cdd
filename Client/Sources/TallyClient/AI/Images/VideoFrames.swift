import TallyAPI

/// Which frames of a clip to send a model as images (`ChatContentPart.videoFrames(of:count:detail:rule:)` on
/// Apple platforms samples them): pure, so the choice is tested on every platform.
public enum VideoFrames {
    /// The times, in seconds, of `count` frames of a clip `duration` seconds long: each in the middle of one of `count` equal
    /// segments (a clip of 9 s in three: 1.5, 4.5 and 7.5 s), so every part of the clip is seen and no frame is the
    /// black first one or past the end. `count` is clamped to at least 1 and at most `maxPerRequest` (the model's
    /// limit: more would be refused); a clip with no length (zero, negative, not finite) gives the one frame at 0.
    public static func times(duration: Double, count: Int, maxPerRequest: Int) -> [Double] {
        let frames = min(max(count, 1), max(maxPerRequest, 1))
        guard duration.isFinite, duration > 0 else { return [0] }
        return (0..<frames).map { duration * Double(2 * $0 + 1) / Double(2 * frames) }
    }

    /// The most frames of a `width`×`height` clip seen at `detail` whose prompt tokens — the provider's, as `model`'s
    /// ``AIImageRule`` counts them, not wallet tokens — fit in `budget`, and at most the model's `maxPerRequest`; 0
    /// when not one fits or the model takes no images. (A wallet budget `b` is `b × promptTokensPerCredit` prompt
    /// tokens, less what the text and the answer need: ``AIClient/estimatedCost(model:parts:maxTokens:)`` prices the whole call.)
    public static func frameCount(budget: Int, model: AIModelSpec, width: Int, height: Int, detail: ImageDetail) -> Int {
        guard let rule = model.images else { return 0 }
        let limit = max(rule.maxPerRequest, 0)
        let each = rule.tokens(width: width, height: height, detail: detail)
        guard each > 0 else { return limit }
        return min(limit, max(budget, 0) / each)
    }
}
