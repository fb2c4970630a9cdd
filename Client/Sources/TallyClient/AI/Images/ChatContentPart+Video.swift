#if canImport(AVFoundation) && canImport(ImageIO) && !os(watchOS)
import AVFoundation
import CoreGraphics
import Foundation
import TallyAPI

// Apple platforms but watchOS (no AVAssetImageGenerator), and kept thin: which frames is ``VideoFrames``'s and how
// each is encoded ``AIImageUpload``'s (both tested on Linux). What a device must still confirm: that the frames
// come from the planned times (zero tolerance asks for exact frames; a clip whose video track ends before its audio
// may fail near the end), upright (the track's transform applied) and at the planned size.

extension ChatContentPart {
    /// `count` frames of the clip at `url` as image parts, each from the middle of an equal segment
    /// (``VideoFrames/times(duration:count:maxPerRequest:)``: at least 1, at most the rule's `maxPerRequest`),
    /// decoded by AVFoundation at the size the model sees and encoded as ``image(_:detail:rule:)`` encodes a picture.
    /// Ask about them with a text part: `ChatMessage(role: "user", parts: [.text("What happens here?")] + frames)`;
    /// ``VideoFrames/frameCount(budget:model:width:height:detail:)`` says how many fit a budget.
    /// - Throws: AVFoundation's error when the clip cannot be read or a frame decoded; ``ClientError`` from encoding.
    public static func videoFrames(
        of url: URL, count: Int, detail: ImageDetail = .auto, rule: AIImageRule = AIImageRule()
    ) async throws -> [ChatContentPart] {
        let asset = AVURLAsset(url: url)
        let length = try await asset.load(.duration)
        let generator = AVAssetImageGenerator(asset: asset)
        generator.appliesPreferredTrackTransform = true
        generator.requestedTimeToleranceBefore = .zero
        generator.requestedTimeToleranceAfter = .zero
        if let track = try await asset.loadTracks(withMediaType: .video).first {
            let (size, transform) = try await track.load(.naturalSize, .preferredTransform)
            let upright = size.applying(transform)
            let plan = AIImageUpload.plan(width: Int(abs(upright.width)), height: Int(abs(upright.height)), rule: rule)
            generator.maximumSize = CGSize(width: plan.width, height: plan.height)
        }
        var parts: [ChatContentPart] = []
        for seconds in VideoFrames.times(duration: length.seconds, count: count, maxPerRequest: rule.maxPerRequest) {
            let time = CMTime(seconds: seconds, preferredTimescale: 600)
            let frame: CGImage
            if #available(iOS 16, macOS 13, tvOS 16, *) {
                frame = try await generator.image(at: time).image
            } else {
                frame = try generator.copyCGImage(at: time, actualTime: nil)  // iOS 15: synchronous, a few ms a frame
            }
            parts.append(try image(frame, detail: detail, rule: rule))
        }
        return parts
    }
}
#endif
