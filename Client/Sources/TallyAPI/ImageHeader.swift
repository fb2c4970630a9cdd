/// An image's pixel size, read from its header without decoding a pixel: PNG's `IHDR`, JPEG's `SOF` marker (found by
/// walking the segments before it, EXIF blocks of any size included), WebP's `VP8 `/`VP8L`/`VP8X` chunk, GIF's
/// logical screen. The gateway prices an image part from this, and so does an app before it asks.
///
/// Every reader is total and bounded: it reads only inside the bytes given (each step of the JPEG walk moves forward
/// by at least two bytes), and answers a size or a ``ImageHeader/Failure``, never a trap.
public struct ImageHeader: Sendable, Hashable {
    /// The formats the gateway measures.
    public enum Format: String, Sendable, Hashable, CaseIterable {
        /// Portable Network Graphics.
        case png
        /// JPEG (JFIF or EXIF; baseline, progressive, lossless, arithmetic-coded).
        case jpeg
        /// WebP, lossy (`VP8 `), lossless (`VP8L`) or extended (`VP8X`: alpha, animation; its canvas).
        case webp
        /// GIF 87a or 89a (its logical screen).
        case gif

        /// The MIME type a `data:` URL of this format declares.
        public var mimeType: String { "image/\(rawValue)" }

        /// The format a MIME type names (`image/jpg` and `image/pjpeg` are JPEG), or nil.
        public init?(mimeType: String) {
            switch mimeType.lowercased() {
            case "image/png": self = .png
            case "image/jpeg", "image/jpg", "image/pjpeg": self = .jpeg
            case "image/webp": self = .webp
            case "image/gif": self = .gif
            default: return nil
            }
        }
    }

    /// Why bytes are not a measurable image.
    public enum Failure: Error, Sendable, Hashable {
        /// The bytes do not start like a PNG, JPEG, WebP or GIF.
        case unrecognized
        /// The format is recognised but the bytes end before its size (or a JPEG ends before any `SOF`).
        case truncated(Format)
        /// The header is there but malformed: a zero width or height, a segment length below 2, a scan before the
        /// frame header, an unknown WebP chunk.
        case malformed(Format, String)
    }

    /// The format.
    public var format: Format
    /// Width in pixels (at least 1).
    public var width: Int
    /// Height in pixels (at least 1).
    public var height: Int

    /// A measured image.
    public init(format: Format, width: Int, height: Int) {
        (self.format, self.width, self.height) = (format, width, height)
    }

    /// The format the first bytes announce, or nil.
    public static func format<Bytes: RandomAccessCollection>(of bytes: Bytes) -> Format? where Bytes.Element == UInt8, Bytes.Index == Int {
        let b = Reader(bytes)
        if b.matches(0, [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if b.matches(0, [0xFF, 0xD8, 0xFF]) { return .jpeg }
        if b.matches(0, Array("RIFF".utf8)), b.matches(8, Array("WEBP".utf8)) { return .webp }
        if b.matches(0, Array("GIF87a".utf8)) || b.matches(0, Array("GIF89a".utf8)) { return .gif }
        return nil
    }

    /// Reads the size of the image `bytes` hold.
    public static func read<Bytes: RandomAccessCollection>(_ bytes: Bytes) -> Result<ImageHeader, Failure>
    where Bytes.Element == UInt8, Bytes.Index == Int {
        guard let format = format(of: bytes) else { return .failure(.unrecognized) }
        let b = Reader(bytes)
        let size: Result<(Int, Int), Failure>
        switch format {
        case .png: size = png(b)
        case .jpeg: size = jpeg(b)
        case .webp: size = webp(b)
        case .gif: size = gif(b)
        }
        return size.flatMap { width, height in
            guard width >= 1, height >= 1 else { return .failure(.malformed(format, "a width or height of 0")) }
            return .success(ImageHeader(format: format, width: width, height: height))
        }
    }

    // PNG: the signature, then the IHDR chunk first: length 13, "IHDR", width and height big-endian (≤ 2³¹ − 1).
    private static func png<Bytes>(_ b: Reader<Bytes>) -> Result<(Int, Int), Failure> {
        guard let width = b.uint32BE(16), let height = b.uint32BE(20) else { return .failure(.truncated(.png)) }
        guard b.matches(12, Array("IHDR".utf8)) else { return .failure(.malformed(.png, "the first chunk is not IHDR")) }
        guard width < 1 << 31, height < 1 << 31 else { return .failure(.malformed(.png, "a dimension beyond 2^31 - 1")) }
        return .success((width, height))
    }

    // GIF: "GIF8?a", then the logical screen's width and height, little-endian.
    private static func gif<Bytes>(_ b: Reader<Bytes>) -> Result<(Int, Int), Failure> {
        guard let width = b.uint16LE(6), let height = b.uint16LE(8) else { return .failure(.truncated(.gif)) }
        return .success((width, height))
    }

    // WebP: "RIFF" size "WEBP", then the first chunk names the bitstream.
    private static func webp<Bytes>(_ b: Reader<Bytes>) -> Result<(Int, Int), Failure> {
        guard b.count >= 16 else { return .failure(.truncated(.webp)) }
        if b.matches(12, Array("VP8 ".utf8)) {
            // A key frame's tag (3 bytes), the start code 9d 01 2a, then 14-bit width and height (2 bits of scale above).
            guard let width = b.uint16LE(26), let height = b.uint16LE(28) else { return .failure(.truncated(.webp)) }
            guard b.matches(23, [0x9D, 0x01, 0x2A]) else { return .failure(.malformed(.webp, "no VP8 key frame start code")) }
            return .success((width & 0x3FFF, height & 0x3FFF))
        }
        if b.matches(12, Array("VP8L".utf8)) {
            // The signature 0x2f, then width − 1 and height − 1 in 14 bits each, little-endian bit order.
            guard let bits = b.uint32LE(21) else { return .failure(.truncated(.webp)) }
            guard b.byte(20) == 0x2F else { return .failure(.malformed(.webp, "no VP8L signature")) }
            return .success(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
        }
        if b.matches(12, Array("VP8X".utf8)) {
            // Flags and reserved bytes (4), then the canvas's width − 1 and height − 1 in 24 bits each.
            guard let width = b.uint24LE(24), let height = b.uint24LE(27) else { return .failure(.truncated(.webp)) }
            return .success((width + 1, height + 1))
        }
        return .failure(.malformed(.webp, "the first chunk is not VP8, VP8L or VP8X"))
    }

    // JPEG: walk the marker segments from SOI to the first SOF (any of C0–CF but DHT C4, JPG C8 and DAC CC), whose
    // body is precision (1), height (2), width (2), big-endian. Segments before it (APPn with EXIF, ICC, XMP;
    // DQT; DHT; COM) are skipped by their length. A scan (DA) or the end (D9) before a frame header is malformed.
    private static func jpeg<Bytes>(_ b: Reader<Bytes>) -> Result<(Int, Int), Failure> {
        var at = 2
        while true {
            guard let first = b.byte(at) else { return .failure(.truncated(.jpeg)) }
            guard first == 0xFF else { return .failure(.malformed(.jpeg, "no marker where a segment should start")) }
            // Fill bytes: any number of 0xFF before the marker's code.
            var codeAt = at + 1
            while b.byte(codeAt) == 0xFF { codeAt += 1 }
            guard let code = b.byte(codeAt) else { return .failure(.truncated(.jpeg)) }
            switch code {
            case 0xD0...0xD7, 0x01:  // restart markers and TEM stand alone
                at = codeAt + 1
                continue
            case 0xD8, 0xD9, 0xDA, 0x00:
                return .failure(.malformed(.jpeg, code == 0xDA ? "a scan before the frame header" : "no frame header"))
            default: break
            }
            guard let length = b.uint16BE(codeAt + 1) else { return .failure(.truncated(.jpeg)) }
            guard length >= 2 else { return .failure(.malformed(.jpeg, "a segment length below 2")) }
            if (0xC0...0xCF).contains(code), code != 0xC4, code != 0xC8, code != 0xCC {
                guard length >= 7 else { return .failure(.malformed(.jpeg, "a frame header shorter than its fields")) }
                guard let height = b.uint16BE(codeAt + 4), let width = b.uint16BE(codeAt + 6) else { return .failure(.truncated(.jpeg)) }
                return .success((width, height))
            }
            at = codeAt + 1 + length
        }
    }
}

/// Bounds-checked big- and little-endian reads over any random-access bytes: every read outside answers nil.
private struct Reader<Bytes: RandomAccessCollection> where Bytes.Element == UInt8, Bytes.Index == Int {
    let bytes: Bytes
    init(_ bytes: Bytes) { self.bytes = bytes }

    var count: Int { bytes.count }

    func byte(_ offset: Int) -> UInt8? {
        guard offset >= 0, offset < bytes.count else { return nil }
        return bytes[bytes.startIndex + offset]
    }

    func matches(_ offset: Int, _ expected: [UInt8]) -> Bool {
        guard offset >= 0, offset <= bytes.count - expected.count else { return false }
        return expected.indices.allSatisfy { bytes[bytes.startIndex + offset + $0] == expected[$0] }
    }

    func uint(_ offset: Int, _ width: Int, bigEndian: Bool) -> Int? {
        guard offset >= 0, offset <= bytes.count - width else { return nil }
        var value = 0
        for index in 0..<width {
            let byte = Int(bytes[bytes.startIndex + offset + (bigEndian ? index : width - 1 - index)])
            value = value << 8 | byte
        }
        return value
    }

    func uint16BE(_ offset: Int) -> Int? { uint(offset, 2, bigEndian: true) }
    func uint32BE(_ offset: Int) -> Int? { uint(offset, 4, bigEndian: true) }
    func uint16LE(_ offset: Int) -> Int? { uint(offset, 2, bigEndian: false) }
    func uint24LE(_ offset: Int) -> Int? { uint(offset, 3, bigEndian: false) }
    func uint32LE(_ offset: Int) -> Int? { uint(offset, 4, bigEndian: false) }
}
