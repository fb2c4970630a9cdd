import Foundation
import TallyAPI
import TallyStore

/// The `cursor` of a range query (`GET /v1/collections/{collection}/docs`): the position of the last
/// document of a page, (range value, id), sealed for the user and the collection (``CursorKeys``). Its payload is
/// `n<id>` for a collection without a range key, `r<byte count>:<range value><id>` for one with. Anything else,
/// or another user's or collection's cursor, does not open.
enum RangeCursor {
    /// The longest cursor: a range value of ``CollectionSpec/maxRangeValueBytes``, an id of 128 bytes and the tag.
    static let maxLength = 2_048

    /// The cursor after `record`, for `userId`.
    static func encode(after record: DocumentRecord, userId: String, keys: CursorKeys) throws -> String {
        let payload = record.rangeValue.map { "r\($0.utf8.count):\($0)\(record.id)" } ?? "n\(record.id)"
        return try keys.seal(Array(payload.utf8), purpose: "range/\(record.collection)", userId: userId)
    }

    /// The position a cursor of `userId` names in `collection` (with a range key or without, `rangeKeyed`); 400
    /// `invalid_cursor` when this server did not issue it to this user for this collection.
    static func decode(_ cursor: String, collection: String, rangeKeyed: Bool, userId: String, keys: CursorKeys) throws
        -> (rangeValue: String?, id: String)
    {
        guard let payload = keys.open(cursor, purpose: "range/\(collection)", userId: userId, maxLength: maxLength),
            let position = position(payload), (position.rangeValue != nil) == rangeKeyed
        else {
            throw APIError(.invalidCursor, "'cursor' was not issued by this server to this user for this collection.")
        }
        return position
    }

    private static func position(_ data: [UInt8]) -> (rangeValue: String?, id: String)? {
        guard let kind = data.first else { return nil }
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
