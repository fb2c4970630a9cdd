import TallyAPI

/// How the SDK prepares a picture for a model (`ChatContentPart.image(_:detail:rule:)` on Apple platforms): the
/// size to redraw it at and the JPEG quality to encode it with. Pure, so the choice is tested on every platform.
///
/// The size is the one the model sees (``AIImageRule/scaledSize(width:height:)``: no pixel past `fitWithin` or
/// `shortestSide` of a tile-priced model, nor past `maxPatches` of a patch-priced one), never larger than the
/// source: the provider would scale a bigger upload down to it anyway, so downscaling first cuts the upload's bytes
/// and nothing of what the model sees or what it costs.
public struct AIImageUpload: Sendable, Hashable {
    /// The width to encode at, in pixels (at least 1).
    public var width: Int
    /// The height to encode at, in pixels (at least 1).
    public var height: Int
    /// The JPEG quality, 0 to 1 (``jpegQuality``).
    public var quality: Double

    /// The quality every image is encoded at: 0.8 keeps small print and faces sharp for a model at about a tenth of
    /// a PNG's bytes; the price does not depend on it (only the pixel size counts).
    public static let jpegQuality = 0.8

    /// The plan for a `width`×`height` source under `rule`.
    public static func plan(width: Int, height: Int, rule: AIImageRule) -> AIImageUpload {
        let source = (width: max(width, 1), height: max(height, 1))
        let seen = rule.scaledSize(width: source.width, height: source.height)
        return AIImageUpload(
            width: min(max(seen.width, 1), source.width), height: min(max(seen.height, 1), source.height), quality: jpegQuality)
    }
}
