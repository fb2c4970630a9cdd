/// A `data:` URL holding an image (`data:image/png;base64,iVBOR…`), measured where it lies: its base64 text is
/// checked in one pass and read through ``Base64Bytes`` — a view that decodes any byte on demand — so a 10 MB photo's
/// size is found by decoding its first few dozen bytes (a JPEG's segments up to its frame header), never the whole.
public struct ImageDataURL: Sendable, Hashable {
    /// Why a URL is not a usable image `data:` URL.
    public enum Failure: Error, Sendable, Hashable {
        /// Not `data:<image type>[;params];base64,<data>`.
        case notBase64DataURL
        /// The declared type is not PNG, JPEG, WebP or GIF (it is named, cut to 64 bytes).
        case unsupportedType(String)
        /// The base64 text has a character outside its alphabet, bad padding or a length not a multiple of 4.
        case invalidBase64
        /// The decoded image is larger than the limit.
        case tooLarge(bytes: Int, limit: Int)
        /// The bytes are not an image of the declared type, or its header is truncated or malformed.
        case header(ImageHeader.Failure)
        /// The bytes are an image of another type than the declared one.
        case typeMismatch(declared: ImageHeader.Format, found: ImageHeader.Format)
    }

    /// The declared format (equal to the header's).
    public var format: ImageHeader.Format
    /// The decoded size in bytes.
    public var byteCount: Int
    /// The pixel size, from the header.
    public var header: ImageHeader

    /// Measures `url` (whose decoded image may hold at most `maxBytes` bytes).
    public static func measure(_ url: String, maxBytes: Int) -> Result<ImageDataURL, Failure> {
        var url = url
        return url.withUTF8 { measure(utf8: $0, maxBytes: maxBytes) }
    }

    /// Whether `bytes` start with the scheme `data:`, its letters in any case: the one test of it that the pricing, its
    /// measure and the gateway's JSON reader share. Only letters fold (`| 0x20` would also take the control byte 0x1A
    /// for the colon).
    static func hasDataScheme(_ bytes: some Collection<UInt8>) -> Bool {
        bytes.count >= 5 && zip(bytes, "data:".utf8).allSatisfy { byte, expected in byte == expected || (expected != UInt8(ascii: ":") && byte | 0x20 == expected) }
    }

    /// Measures a `data:` URL given as UTF-8 bytes; `base64Checked`: the caller has found every byte after its first
    /// comma in the base64 alphabet but for up to two `=` at the end (``JSONObjectText``), which is not checked again.
    static func measure(utf8 url: UnsafeBufferPointer<UInt8>, maxBytes: Int, base64Checked: Bool = false) -> Result<ImageDataURL, Failure> {
        guard hasDataScheme(url), let comma = url.firstIndex(of: UInt8(ascii: ",")) else { return .failure(.notBase64DataURL) }
        // "image/png;charset=x;base64": the type, parameters, and base64 last.
        let meta = String(decoding: url[5..<comma], as: UTF8.self)
        let pieces = meta.split(separator: ";", omittingEmptySubsequences: false)
        guard pieces.count >= 2, pieces.last?.lowercased() == "base64" else { return .failure(.notBase64DataURL) }
        guard let declared = ImageHeader.Format(mimeType: String(pieces[0])) else {
            return .failure(.unsupportedType(String(pieces[0].prefix(64))))
        }
        let text = UnsafeBufferPointer(rebasing: url[(comma + 1)...])
        guard let bytes = Base64Bytes(text, alphabetChecked: base64Checked) else { return .failure(.invalidBase64) }
        guard bytes.count <= maxBytes else { return .failure(.tooLarge(bytes: bytes.count, limit: maxBytes)) }
        switch ImageHeader.read(bytes) {
        case .failure(let failure): return .failure(.header(failure))
        case .success(let header):
            guard header.format == declared else { return .failure(.typeMismatch(declared: declared, found: header.format)) }
            return .success(ImageDataURL(format: declared, byteCount: bytes.count, header: header))
        }
    }
}

/// The bytes base64 text decodes to, as a random-access collection that decodes each byte when read: byte `k`
/// lives in the four characters from `4 × (k / 3)`. The text is checked whole when the view is made.
struct Base64Bytes: RandomAccessCollection {
    // The text is borrowed for the view's life (the caller's `withUTF8`); the view never escapes a measurement.
    private let text: UnsafeBufferPointer<UInt8>
    /// The number of decoded bytes.
    let count: Int

    /// A view of `text`, or nil when it is not standard base64 (alphabet `A–Z a–z 0–9 + /`, `=` padding only at the
    /// end, a length that is a multiple of 4); `alphabetChecked`: the caller has checked the alphabet before the `=`.
    init?(_ text: UnsafeBufferPointer<UInt8>, alphabetChecked: Bool = false) {
        guard text.count % 4 == 0 else { return nil }
        // Up to two `=` at the end; before them, only the alphabet (checked sixteen bytes at a time: this runs over megabytes).
        var end = text.count
        while end > 0, text.count - end < 2, text[end - 1] == UInt8(ascii: "=") { end -= 1 }
        guard alphabetChecked || ByteScan.isBase64Alphabet(UnsafeBufferPointer(rebasing: text[..<end])) else { return nil }
        self.text = text
        self.count = text.count / 4 * 3 - (text.count - end)
    }

    /// The first byte's index, 0.
    var startIndex: Int { 0 }
    /// One past the last byte.
    var endIndex: Int { count }

    /// The decoded byte at `position` (`0 ..< count`).
    subscript(position: Int) -> UInt8 {
        precondition(position >= 0 && position < count, "Base64Bytes: index out of range")
        let quad = position / 3 * 4
        let bits = (0..<4).reduce(UInt32(0)) { $0 << 6 | UInt32(Self.value(text[quad + $1]) ?? 0) }
        return UInt8(truncatingIfNeeded: bits >> (16 - 8 * (position % 3)))
    }

    /// The six bits a base64 character stands for; nil outside the alphabet (the one definition of it).
    static func value(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return character - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return character - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return character - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): return 62
        case UInt8(ascii: "/"): return 63
        default: return nil
        }
    }
}
