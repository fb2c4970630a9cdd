import Foundation
import TallyAPI

/// Images of any size with headers exactly as their formats specify, for pricing tests: a 4096×4096 image costs a
/// few hundred bytes here, and the gateway, dev-llm and the SDK read only headers. (Real encoder output, from
/// Pillow, is in `Tests/Fixtures/images`.)
public enum SyntheticImage {
    /// The WebP bitstream a synthetic WebP uses.
    public enum WebPKind: Sendable, CaseIterable { case lossy, lossless, extended }

    /// An image of `format` and size; a JPEG carries an EXIF APP1 block of `exifBytes` before its frame header
    /// (split into segments of at most 65,533 bytes) and is progressive when asked.
    public static func bytes(
        _ format: ImageHeader.Format, width: Int, height: Int, exifBytes: Int = 0, progressive: Bool = false, webp: WebPKind = .lossy
    ) -> [UInt8] {
        switch format {
        case .png: return png(width: width, height: height)
        case .jpeg: return jpeg(width: width, height: height, exifBytes: exifBytes, progressive: progressive)
        case .webp: return webpBytes(width: width, height: height, kind: webp)
        case .gif: return gif(width: width, height: height)
        }
    }

    /// The image as a `data:` URL.
    public static func dataURL(_ bytes: [UInt8], format: ImageHeader.Format) -> String {
        "data:\(format.mimeType);base64," + Data(bytes).base64EncodedString()
    }

    private static func png(width: Int, height: Int) -> [UInt8] {
        var out: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        chunk("IHDR", be32(width) + be32(height) + [8, 2, 0, 0, 0], into: &out)
        // One stored deflate block of a single filtered row's worth of zeros (not the whole image: readers stop at IHDR).
        chunk("IDAT", [0x78, 0x01, 0x01, 0x01, 0x00, 0xFE, 0xFF, 0x00, 0x00, 0x01, 0x00, 0x01], into: &out)
        chunk("IEND", [], into: &out)
        return out
    }

    private static func chunk(_ type: String, _ data: [UInt8], into out: inout [UInt8]) {
        out += be32(data.count)
        let body = Array(type.utf8) + data
        out += body + be32(Int(crc32(body)))
    }

    private static func jpeg(width: Int, height: Int, exifBytes: Int, progressive: Bool) -> [UInt8] {
        var out: [UInt8] = [0xFF, 0xD8]
        var left = exifBytes
        var first = true
        while left > 0 {
            let payload = min(left, 65_533 - (first ? 6 : 0))
            out += [0xFF, 0xE1] + be16(payload + 2 + (first ? 6 : 0)) + (first ? Array("Exif\0\0".utf8) : [])
            out += [UInt8](repeating: 0x4D, count: payload)
            left -= payload
            first = false
        }
        out += [0xFF, 0xDB] + be16(67) + [0] + [UInt8](repeating: 1, count: 64)  // one quantisation table
        out += [0xFF, progressive ? 0xC2 : 0xC0] + be16(17) + [8] + be16(height) + be16(width)
        out += [3, 1, 0x22, 0, 2, 0x11, 0, 3, 0x11, 0]
        out += [0xFF, 0xDA] + be16(12) + [3, 1, 0, 2, 0, 3, 0, 0, 63, 0] + [0x12, 0x34] + [0xFF, 0xD9]
        return out
    }

    private static func webpBytes(width: Int, height: Int, kind: WebPKind) -> [UInt8] {
        let (fourCC, body): (String, [UInt8])
        switch kind {
        case .lossy:
            fourCC = "VP8 "
            body = [0x50, 0x4B, 0x00, 0x9D, 0x01, 0x2A] + le(width & 0x3FFF, 2) + le(height & 0x3FFF, 2) + [0, 0]
        case .lossless:
            fourCC = "VP8L"
            body = [0x2F] + le((width - 1) | (height - 1) << 14, 4) + [0, 0]
        case .extended:
            fourCC = "VP8X"
            body = [0x10, 0, 0, 0] + le(width - 1, 3) + le(height - 1, 3)
        }
        let chunk = Array(fourCC.utf8) + le(body.count, 4) + body + (body.count % 2 == 1 ? [0] : [])
        return Array("RIFF".utf8) + le(4 + chunk.count, 4) + Array("WEBP".utf8) + chunk
    }

    private static func gif(width: Int, height: Int) -> [UInt8] {
        Array("GIF89a".utf8) + le(width, 2) + le(height, 2) + [0x80, 0, 0] + [0, 0, 0, 0xFF, 0xFF, 0xFF]
            + [0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3B]
    }

    private static func be16(_ value: Int) -> [UInt8] { [UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
    private static func be32(_ value: Int) -> [UInt8] { (0..<4).map { UInt8(value >> (24 - 8 * $0) & 0xFF) } }
    private static func le(_ value: Int, _ count: Int) -> [UInt8] { (0..<count).map { UInt8(value >> (8 * $0) & 0xFF) } }

    private static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}
