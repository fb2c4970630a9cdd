#if canImport(ImageIO) && canImport(CoreGraphics) && canImport(UniformTypeIdentifiers)
import CoreGraphics
import Foundation
import ImageIO
import TallyAPI
import UniformTypeIdentifiers

// Apple platforms only, and kept thin: the size and quality are ``AIImageUpload``'s (tested on Linux); this file
// only redraws and encodes. What a device must still confirm (no Apple build runs in CI): that ImageIO writes a
// baseline JPEG whose SOF header gives the planned size (the gateway reads the size from it), and that an image with
// alpha comes out on white.

extension ChatContentPart {
    /// A picture as an image part: redrawn at the size `rule`'s model sees (``AIImageUpload``: never more pixels than
    /// it uses, never upscaled), on white (JPEG has no alpha), in sRGB, and encoded as JPEG at
    /// ``AIImageUpload/jpegQuality`` with ImageIO. The upload is smaller; the price (pixel size only) is unchanged.
    ///
    /// Pass an upright image (a `UIImage`'s `cgImage` ignores its `imageOrientation`) and the model's rule
    /// (`try await tally.ai.model(named:)`'s `images`; the default is OpenAI's tile rule).
    /// - Throws: ``ClientError/Code/invalidInput`` when the image cannot be redrawn or encoded.
    public static func image(_ image: CGImage, detail: ImageDetail = .auto, rule: AIImageRule = AIImageRule()) throws -> ChatContentPart {
        let plan = AIImageUpload.plan(width: image.width, height: image.height, rule: rule)
        guard let space = CGColorSpace(name: CGColorSpace.sRGB),
            let context = CGContext(
                data: nil, width: plan.width, height: plan.height, bitsPerComponent: 8, bytesPerRow: 0, space: space,
                bitmapInfo: CGImageAlphaInfo.noneSkipLast.rawValue)
        else { throw ClientError(.invalidInput, message: "the image cannot be redrawn at \(plan.width)×\(plan.height)") }
        let frame = CGRect(x: 0, y: 0, width: plan.width, height: plan.height)
        context.interpolationQuality = .high
        context.setFillColor(CGColor(red: 1, green: 1, blue: 1, alpha: 1))
        context.fill(frame)
        context.draw(image, in: frame)
        let jpeg = NSMutableData()
        guard let redrawn = context.makeImage(),
            let destination = CGImageDestinationCreateWithData(jpeg as CFMutableData, UTType.jpeg.identifier as CFString, 1, nil)
        else { throw ClientError(.invalidInput, message: "the image cannot be encoded as JPEG") }
        CGImageDestinationAddImage(destination, redrawn, [kCGImageDestinationLossyCompressionQuality: plan.quality] as CFDictionary)
        guard CGImageDestinationFinalize(destination) else { throw ClientError(.invalidInput, message: "the image cannot be encoded as JPEG") }
        return .image(data: jpeg as Data, mimeType: "image/jpeg", detail: detail)
    }
}
#endif
