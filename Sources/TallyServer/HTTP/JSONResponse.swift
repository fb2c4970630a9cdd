import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import TallyAPI

/// JSON in and out, with the API's conventions and clean 4xx errors for bad bodies.
enum JSONResponse {
    static let encoder = TallyJSON.encoder()
    /// Request bodies: the API's conventions, with dates in any RFC 3339 form (``RFC3339``).
    static let decoder: JSONDecoder = {
        let decoder = TallyJSON.decoder()
        decoder.dateDecodingStrategy = .custom(RFC3339.decode)
        return decoder
    }()

    /// Encodes `body` as a response.
    static func make(status: HTTPResponse.Status = .ok, body: some Encodable, headers: HTTPFields = [:]) -> Response {
        let encoded = (try? bytes(body)) ?? Array(#"{"error":{"code":"internal","message":"encoding failed"}}"#.utf8)
        return make(status: status, bytes: encoded, headers: headers)
    }

    /// A response with an already encoded body.
    static func make(status: HTTPResponse.Status, bytes: some Collection<UInt8>, headers: HTTPFields = [:]) -> Response {
        var fields = headers
        fields[.contentType] = "application/json; charset=utf-8"
        return Response(status: status, headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// Encodes a value to bytes (for a response, or for storage under an idempotency key); the hottest
    /// replies are written by hand (``JSONWritable``).
    static func bytes(_ body: some Encodable) throws -> [UInt8] {
        if let writable = body as? any JSONWritable { return JSONWriter.bytes(of: writable) }
        return [UInt8](try encoder.encode(body))
    }
}

/// A decoded JSON request body together with its raw bytes (for idempotency fingerprints).
struct JSONBody<Value: JSONRequestBody> {
    let value: Value
    let raw: ByteBuffer

    /// Reads and decodes the body; malformed, mistyped or missing fields, repeated keys and integer fields
    /// not written as integers are 400, oversize is 413.
    static func read(_ request: Request, context: some RequestContext) async throws -> JSONBody {
        let buffer = try await RequestBody.collect(request, upTo: context.maxUploadSize)
        // A body in a type's direct form is valid JSON by construction (one key, a string without escapes): the
        // scanner's pass over it (3 % of a purchase replay's CPU, over an 8 KB signed transaction) would find nothing.
        let direct: Value? = buffer.withUnsafeReadableBytes { Value.decodeDirectly($0) }
        if let direct { return JSONBody(value: direct, raw: buffer) }
        if let problem = buffer.withUnsafeReadableBytes({ JSONScanner.firstProblem(in: $0, integerFields: Value.integerFields) }) {
            throw APIError(problem)
        }
        do {
            return JSONBody(value: try JSONResponse.decoder.decode(Value.self, from: Data(buffer.readableBytesView)), raw: buffer)
        } catch let error as DecodingError {
            throw APIError(.invalidJSON, Self.describe(error))
        } catch {
            throw APIError(.invalidJSON, "The body is not valid JSON.")
        }
    }

    private static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? "the body" : "'\(path)'"
        }
        switch error {
        case .keyNotFound(let key, let context):
            let parent = context.codingPath.map(\.stringValue) + [key.stringValue]
            return "Missing field '\(parent.joined(separator: "."))'."
        case .typeMismatch(let type, let context):
            return "Wrong type for \(path(context)): expected \(Self.name(of: type))."
        case .valueNotFound(let type, let context):
            return "Null for \(path(context)): expected \(Self.name(of: type))."
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty
                ? "The body is not valid JSON." : "Invalid value for \(path(context)): \(context.debugDescription)."
        @unknown default:
            return "The body is not valid JSON."
        }
    }

    private static func name(of type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Int.Type, is Int64.Type: return "an integer"
        case is Bool.Type: return "a boolean"
        case is Date.Type: return "an RFC 3339 date-time"
        default: return "\(type)"
        }
    }
}

/// Request bodies read whole, up to a limit of the route's choosing.
enum RequestBody {
    /// The body; 413 `body_too_large` beyond `limit` bytes.
    static func collect(_ request: Request, upTo limit: Int) async throws -> ByteBuffer {
        do {
            // A large body that says its length (a chat body with images) is read into one buffer of that size:
            // grown by doubling, its megabytes would be copied again at each step and their pages touched twice.
            if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > Self.presizedBytes, length <= limit {
                var collected = ByteBufferAllocator().buffer(capacity: length)
                for try await var chunk in request.body {
                    guard collected.readableBytes + chunk.readableBytes <= limit else { throw Overflow() }
                    collected.writeBuffer(&chunk)
                }
                return collected
            }
            return try await request.body.collect(upTo: limit)
        } catch {
            throw APIError(.bodyTooLarge, "The request body exceeds \(limit) bytes.")
        }
    }

    /// Bodies that say a length above this are read into a buffer of that size at once.
    static let presizedBytes = 64 * 1024

    private struct Overflow: Error {}

    /// The body as one JSON value (``JSONValue/parse(_:)``: strict, no repeated keys); 400 `invalid_json` otherwise.
    static func json(_ request: Request, upTo limit: Int) async throws -> JSONValue {
        let buffer = try await collect(request, upTo: limit)
        do {
            return try JSONValue.parse(buffer.readableBytesView)
        } catch {
            throw APIError(.invalidJSON, "The body is not valid JSON: \(error.description).")
        }
    }
}

extension APIError {
    /// The client-facing form of a problem ``JSONScanner`` found.
    init(_ problem: JSONScanner.Problem) {
        switch problem {
        case .malformed:
            self.init(.invalidJSON, "The body is not valid JSON.")
        case .duplicateKey(let key):
            self.init(.invalidJSON, "The body repeats the key '\(key.prefix(100))' in one object.")
        case .notAnInteger(let field):
            self.init(.invalidJSON, "Wrong type for '\(field)': expected an integer such as 5, without a fraction or exponent.")
        case .integerOutOfRange(let field):
            self.init(.invalidField, "'\(field)' is beyond the 64-bit integer range.")
        }
    }
}
