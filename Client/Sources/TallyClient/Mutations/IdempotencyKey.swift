import Foundation

/// The Idempotency-Key of a request made for an intent: any string the app chooses (a message id, a question's
/// text) scoped to the whole request, so one intent on two actions is two writes, and always a valid header
/// (64 hexadecimal digits; the server takes 1–255 printable ASCII characters).
enum IdempotencyKey {
    /// The SHA-256 of the method, path, body and intent, each length-prefixed so no two requests share an input.
    static func derive(method: String, path: String, body: Data?, intent: String) -> String {
        var input: [UInt8] = []
        input.reserveCapacity(method.utf8.count + path.utf8.count + (body?.count ?? 0) + intent.utf8.count + 32)
        func field(_ bytes: some Collection<UInt8>) {
            let count = UInt64(bytes.count)
            for shift in stride(from: 56, through: 0, by: -8) { input.append(UInt8(truncatingIfNeeded: count >> UInt64(shift))) }
            input.append(contentsOf: bytes)
        }
        field(method.uppercased().utf8)
        field(path.utf8)
        field(body ?? Data())
        field(intent.utf8)
        return SHA256.hex(input)
    }
}
