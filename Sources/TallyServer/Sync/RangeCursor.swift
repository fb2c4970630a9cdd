import Foundation
import TallyAPI
import TallyStore

/// The `cursor` of a range query (`GET /v1/collections/{collection}/docs`): the position of the last
/// document of a page, (range value, id). Opaque on the wire: base64url of `n<id>` for a collection
/// without a range key, `r<byte count>:<range value><id>` for one with. Anything else does not decode.
enum RangeCursor {
    /// The cursor after `record`.
    static func encode(after record: DocumentRecord) -> String {
        guard let value = record.rangeValue else { return Secrets.base64URL(Data("n\(record.id)".utf8)) }
        return Secrets.base64URL(Data("r\(value.utf8.count):\(value)\(record.id)".utf8))
    }

    /// The position a cursor names in a collection with (`rangeKeyed`) or without a range key; 400
    /// `invalid_cursor` when this server did not issue it for such a collection.
    static func decode(_ cursor: String, rangeKeyed: Bool) throws -> (rangeValue: String?, id: String) {
        guard let position = position(cursor), (position.rangeValue != nil) == rangeKeyed else {
            throw APIError(.invalidCursor, "'cursor' was not issued by this server for this collection.")
        }
        return position
    }

    private static func position(_ cursor: String) -> (rangeValue: String?, id: String)? {
        guard let data = Secrets.base64URLDecoded(cursor), let kind = data.first else { return nil }
        let rest = data.dropFirst()
        switch kind {
        case UInt8(ascii: "n"):
            let id = String(decoding: rest, as: UTF8.self)
            return CollectionSpec.isValidDocumentId(id) ? (nil, id) : nil
        case UInt8(ascii: "r"):
            guard let colon = rest.firstIndex(of: UInt8(ascii: ":")), colon - rest.startIndex <= 10,
                let count = Int(String(decoding: rest[..<colon], as: UTF8.self)), count >= 0,
                count <= rest.endIndex - colon - 1
            else { return nil }
            let valueBytes = rest[(colon + 1)..<(colon + 1 + count)]
            let value = String(decoding: valueBytes, as: UTF8.self)
            let id = String(decoding: rest[(colon + 1 + count)...], as: UTF8.self)
            guard value.utf8.elementsEqual(valueBytes), CollectionSpec.isValidDocumentId(id) else { return nil }
            return (value, id)
        default:
            return nil
        }
    }
}
