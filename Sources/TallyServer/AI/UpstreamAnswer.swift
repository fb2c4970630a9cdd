import AsyncHTTPClient
import NIOCore
import TallyAPI

/// A non-streamed answer of the upstream, read in bounded memory: whole up to ``maxBytes`` (what the gateway
/// returns and stores); beyond, only its `usage`, found by ``UsageScan`` as the rest goes by, so that what the
/// provider generated — and billed — is charged even when the answer is not returned.
enum UpstreamAnswer {
    /// The answer, at most ``maxBytes``.
    case whole([UInt8])
    /// An answer longer than ``maxBytes``: its top-level `usage`, if it had a readable one, and its length.
    case tooLarge(usage: ChatUsage?, bytes: Int)

    /// The longest answer returned (and stored under an `Idempotency-Key`): 16 MiB.
    static let maxBytes = 16 << 20

    /// Reads `body` to its end; throws when the upstream's connection fails.
    static func read(_ body: HTTPClientResponse.Body) async throws -> UpstreamAnswer {
        var buffer = ByteBuffer()
        var scan: UsageScan?
        var total = 0
        for try await piece in body {
            total += piece.readableBytes
            if scan != nil {
                scan!.feed(piece.readableBytesView)
            } else if buffer.readableBytes + piece.readableBytes <= maxBytes {
                var piece = piece
                buffer.writeBuffer(&piece)
            } else {
                var started = UsageScan()
                started.feed(buffer.readableBytesView)
                started.feed(piece.readableBytesView)
                (scan, buffer) = (started, ByteBuffer())
            }
        }
        if let scan { return .tooLarge(usage: scan.usage, bytes: total) }
        return .whole(Array(buffer.readableBytesView))
    }
}

/// Finds the `usage` member of a JSON object fed in pieces, holding only that member's value (at most
/// ``maxValueBytes``): a single pass that tracks strings, escapes and nesting, so a `"usage"` inside a string or a
/// nested object is not taken. The last top-level `usage` wins.
struct UsageScan {
    /// The longest `usage` value kept (a real one is about 200 bytes, with its details).
    static let maxValueBytes = 16 << 10

    private var depth = 0
    private var inString = false
    private var escaped = false
    private var expectingKey = false
    private var readingKey = false
    private var key: [UInt8] = []
    private var keyIsUsage = false
    private var capturing = false
    private var value: [UInt8] = []
    private var found: [UInt8]?

    /// The usage found so far, if it is one (``ChatCompletionsController/usage(_:)``).
    var usage: ChatUsage? {
        found.flatMap { try? JSONValue.parse($0) }.flatMap { ChatCompletionsController.usage($0) }
    }

    mutating func feed(_ bytes: some Sequence<UInt8>) {
        guard bytes.withContiguousStorageIfAvailable({ scan($0) }) != nil else {
            return Array(bytes).withUnsafeBufferPointer { scan($0) }
        }
    }

    /// The bytes of a string's content (most of a long answer) are skipped in a tight loop to its next quote or
    /// backslash; every other byte goes through ``take(_:)``.
    private mutating func scan(_ bytes: UnsafeBufferPointer<UInt8>) {
        var index = 0
        while index < bytes.count {
            if inString, !escaped, !capturing, !readingKey {
                while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\") { index += 1 }
                if index == bytes.count { return }
            }
            take(bytes[index])
            index += 1
        }
    }

    private mutating func take(_ byte: UInt8) {
        if capturing {
            // The value ends at the comma or brace that closes it at the top level.
            if !inString, depth == 1, byte == UInt8(ascii: ",") || byte == UInt8(ascii: "}") {
                capturing = false
                found = value
            } else if value.count < Self.maxValueBytes {
                value.append(byte)
            } else {
                capturing = false  // not a usage object: too long
            }
        }
        if inString {
            if escaped {
                escaped = false
            } else if byte == UInt8(ascii: "\\") {
                escaped = true
            } else if byte == UInt8(ascii: "\"") {
                inString = false
                if readingKey {
                    readingKey = false
                    keyIsUsage = key == Self.usageKey
                }
            } else if readingKey, key.count <= Self.usageKey.count {
                key.append(byte)
            }
            return
        }
        switch byte {
        case UInt8(ascii: "\""):
            inString = true
            if depth == 1, expectingKey {
                (expectingKey, readingKey, key) = (false, true, [])
            }
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            depth += 1
            if depth == 1 { expectingKey = byte == UInt8(ascii: "{") }
        case UInt8(ascii: "}"), UInt8(ascii: "]"):
            depth -= 1
        case UInt8(ascii: ","):
            if depth == 1 { expectingKey = true }
        case UInt8(ascii: ":"):
            if depth == 1, keyIsUsage {
                (capturing, value, keyIsUsage) = (true, [], false)
            } else if depth == 1 {
                keyIsUsage = false
            }
        default:
            break
        }
    }

    private static let usageKey = Array("usage".utf8)
}
