import Foundation
import HTTPTypes
import Hummingbird
import TallyAPI
import TallyStore

/// The collections the configuration declares, by name.
struct DeclaredCollections: Sendable {
    /// In configuration order.
    let all: [CollectionSpec]
    private let byName: [String: CollectionSpec]

    init(_ collections: [CollectionSpec]) {
        all = collections
        byName = Dictionary(collections.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// The collection named `name`; 404 `unknown_collection` when none is declared.
    func named(_ name: String) throws -> CollectionSpec {
        guard let collection = byName[name] else {
            throw APIError(.unknownCollection, "No collection named '\(name.prefix(64))' is declared (GET /v1/collections lists them).")
        }
        return collection
    }
}

/// Checks of the sync API's inputs; each failure is a 4xx naming the field.
enum SyncInput {
    /// A document id (`[A-Za-z0-9_-]{1,128}`), else 400 `invalid_field`.
    static func documentId(_ id: String, field: String = "docId") throws -> String {
        guard CollectionSpec.isValidDocumentId(id) else {
            throw APIError(.invalidField, "'\(field)' must be 1 to 128 of A-Z, a-z, 0-9, '_' and '-'.")
        }
        return id
    }

    /// A push's `clientId`: 16 to 128 of `A-Z a-z 0-9 - . _ ~`, else 400 `invalid_field`.
    static func clientId(_ id: String) throws -> String {
        let safe = id.utf8.allSatisfy { byte in
            (0x61...0x7A).contains(byte) || (0x41...0x5A).contains(byte) || (0x30...0x39).contains(byte)
                || byte == 0x2D || byte == 0x2E || byte == 0x5F || byte == 0x7E
        }
        guard (16...128).contains(id.utf8.count), safe else {
            throw APIError(.invalidField, "'clientId' must be a random id of 16 to 128 of A-Z, a-z, 0-9, '-', '.', '_' and '~'.")
        }
        return id
    }

    /// The largest body of a document write to `collection`: room for its largest document written less
    /// compactly than the canonical form the limit is measured on (escaped slashes, spaces).
    static func bodyLimit(for collection: CollectionSpec) -> Int { 2 * collection.maxDocumentBytes + 65_536 }

    /// The version `If-Match: "<version>"` or `If-None-Match: *` (0: only if absent) makes a write conditional on.
    static func precondition(_ request: Request) throws -> Int64? {
        let match = request.headers[.ifMatch]
        let noneMatch = request.headers[.ifNoneMatch]
        switch (match, noneMatch) {
        case (nil, nil):
            return nil
        case (let tag?, nil):
            let digits = tag.trimmingCharacters(in: .whitespaces)
            guard digits.utf8.count >= 3, digits.utf8.count <= 21, digits.hasPrefix("\""), digits.hasSuffix("\""),
                let version = Int64(digits.dropFirst().dropLast()), version >= 0
            else {
                throw APIError(.invalidField, "If-Match must be one document version in double quotes, such as \"12\" (its ETag).")
            }
            return version
        case (nil, let tag?):
            guard tag.trimmingCharacters(in: .whitespaces) == "*" else {
                throw APIError(.invalidField, "On a write, If-None-Match takes only '*' (create only).")
            }
            return 0
        case (_?, _?):
            throw APIError(.invalidField, "Send If-Match or If-None-Match, not both.")
        }
    }

    /// A JSON integer, or `nil` when `value` is not one: 400 `invalid_json` for another type or an integer
    /// spelt with a fraction or exponent, 400 `invalid_field` beyond 64 bits.
    static func integer(_ value: JSONValue, field: String) throws -> Int64 {
        guard case .number(let literal) = value,
            literal.utf8.allSatisfy({ (0x30...0x39).contains($0) || $0 == UInt8(ascii: "-") })
        else {
            throw APIError(.invalidJSON, "Wrong type for '\(field)': expected an integer such as 5, without a fraction or exponent.")
        }
        guard let integer = Int64(literal) else { throw APIError(.invalidField, "'\(field)' is beyond the 64-bit integer range.") }
        return integer
    }
}

/// A `POST /v1/sync/push` body, checked whole before anything is applied.
struct PushRequest {
    /// At most this many mutations per push.
    static let maxMutations = 100
    /// At most this many bytes of body per push.
    static let maxBodyBytes = 1 << 20

    let clientId: String
    let mutations: [ClientMutation]

    /// Reads `{"clientId", "mutations": [{"id","op","collection","docId","data"?,"ifVersion"?}]}`: 400 for a
    /// malformed field, more than 100 mutations, or ids that are not positive and strictly increasing; 404
    /// `unknown_collection` for a collection not declared. Data that is not an object is the planner's to
    /// refuse, as a rejected result.
    init(_ body: JSONValue, collections: DeclaredCollections) throws {
        guard case .object(let fields) = body else {
            throw APIError(.invalidJSON, "The body must be an object {\"clientId\", \"mutations\"}.")
        }
        clientId = try SyncInput.clientId(try Self.string(fields["clientId"], field: "clientId"))
        guard let list = fields["mutations"] else { throw APIError(.invalidJSON, "Missing field 'mutations'.") }
        guard case .array(let items) = list else { throw APIError(.invalidJSON, "Wrong type for 'mutations': expected an array.") }
        guard items.count <= Self.maxMutations else {
            throw APIError(.invalidField, "'mutations' holds at most \(Self.maxMutations) mutations per push; send the rest in another.")
        }
        var mutations: [ClientMutation] = []
        mutations.reserveCapacity(items.count)
        var previous: Int64 = 0
        for (index, item) in items.enumerated() {
            let mutation = try Self.mutation(item, at: "mutations[\(index)]", collections: collections)
            guard mutation.id > previous else {
                throw APIError(
                    .invalidField, "'mutations[\(index)].id' must be positive and greater than the id of the mutation before it.")
            }
            previous = mutation.id
            mutations.append(mutation)
        }
        self.mutations = mutations
    }

    private static func mutation(_ item: JSONValue, at path: String, collections: DeclaredCollections) throws -> ClientMutation {
        guard case .object(let fields) = item else { throw APIError(.invalidJSON, "Wrong type for '\(path)': expected an object.") }
        guard let idValue = fields["id"] else { throw APIError(.invalidJSON, "Missing field '\(path).id'.") }
        let id = try SyncInput.integer(idValue, field: "\(path).id")
        let op = try string(fields["op"], field: "\(path).op")
        let collection = try collections.named(try string(fields["collection"], field: "\(path).collection"))
        let docId = try SyncInput.documentId(try string(fields["docId"], field: "\(path).docId"), field: "\(path).docId")
        var ifVersion: Int64?
        if let value = fields["ifVersion"], value != .null {
            let version = try SyncInput.integer(value, field: "\(path).ifVersion")
            guard version >= 0 else { throw APIError(.invalidField, "'\(path).ifVersion' must be 0 (absent) or a version.") }
            ifVersion = version
        }
        let operation: DocumentMutation.Operation
        switch op {
        case "put", "patch":
            guard let data = fields["data"] else { throw APIError(.invalidJSON, "Missing field '\(path).data' (a \(op) carries data).") }
            operation = op == "put" ? .put(data) : .patch(data)
        case "delete":
            operation = .delete
        default:
            throw APIError(.invalidField, "'\(path).op' must be put, patch or delete.")
        }
        return ClientMutation(id: id, mutation: DocumentMutation(collection: collection, docId: docId, operation: operation, ifVersion: ifVersion))
    }

    private static func string(_ value: JSONValue?, field: String) throws -> String {
        guard let value else { throw APIError(.invalidJSON, "Missing field '\(field)'.") }
        guard case .string(let text) = value else { throw APIError(.invalidJSON, "Wrong type for '\(field)': expected a string.") }
        return text
    }
}
