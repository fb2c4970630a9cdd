/// A request body as the AI gateway reads it: parsed as strictly as ``JSONValue/parse(_:)``, with each top-level
/// member's place in the text, and (when asked) every base64 `data:` URL string left where it lies instead of copied
/// into a `String` — an image's megabytes are scanned once, for the base64 alphabet, and measured in place by
/// ``AIPricing/measure(request:dataURLs:in:model:)``; the gateway then sends the client's own bytes upstream.
///
/// A URL left in the text stands in ``value`` as a string no client can predict (a random prefix made for this
/// parse, then a number): ``dataURLs`` says where each one's text is.
@_spi(Gateway)
public struct JSONObjectText: Sendable {
    /// The parsed value; left `data:` URLs are stand-ins.
    public let value: JSONValue
    /// Where each top-level member's value lies in the text (byte offsets), when the value is an object.
    public let members: [JSONKey: Range<Int>]
    /// Each stand-in, and where its `data:` URL's text lies (between the string's quotes).
    public let dataURLs: [String: Range<Int>]

    /// Parses `bytes`; `leavingDataURLs`: base64 `data:` URL strings are left in the text.
    public init(_ bytes: UnsafeBufferPointer<UInt8>, leavingDataURLs: Bool) throws(JSONParseError) {
        let prefix = leavingDataURLs ? "data:tally-stand-in;\(UInt64.random(in: .min ... .max));" : nil
        var parser = JSONParser(bytes: bytes, standInPrefix: prefix)
        value = try parser.document()
        members = parser.members
        dataURLs = parser.dataURLs
    }
}
