import TallyAPI

/// A type a request body decodes into, with the top-level fields that must be written as JSON integers.
///
/// `JSONDecoder` reads `5.0`, `1e3` and `5E0` into an `Int` as 5; ``JSONScanner`` refuses those literals for
/// the fields named here, so a field is an integer on the wire exactly when it is one in Swift (other numbers,
/// such as the floating-point values of future documents, keep their fractions and exponents).
/// Every request type states its list, so a new one cannot forget to.
protocol JSONRequestBody: Decodable {
    /// Top-level keys whose values must be integers (no fraction or exponent) within 64 bits.
    static var integerFields: Set<String> { get }

    /// The value of a body in the one exact form a hot route's clients send, read without `JSONDecoder`; `nil` for any
    /// other form, which `JSONDecoder` reads. Called only on a body ``JSONScanner`` accepted.
    static func decodeDirectly(_ bytes: UnsafeRawBufferPointer) -> Self?
}

extension JSONRequestBody {
    /// No direct form: `JSONDecoder` reads every body.
    static func decodeDirectly(_ bytes: UnsafeRawBufferPointer) -> Self? { nil }
}

/// The string `value` of a body written exactly `{"<key>":"<value>"}`, with no space and nothing in the value but
/// printable ASCII other than `"` and `\` (so no escape to undo): what an SDK sends for a one-field request such as a
/// signed payload (base64url and dots). `nil` for any other body.
func singleStringField(_ key: StaticString, in bytes: UnsafeRawBufferPointer) -> String? {
    let prefixLength = key.utf8CodeUnitCount + 5  // {"  key  ":"
    guard bytes.count > prefixLength + 2, bytes[0] == UInt8(ascii: "{"), bytes[1] == UInt8(ascii: "\""),
        bytes[bytes.count - 2] == UInt8(ascii: "\""), bytes[bytes.count - 1] == UInt8(ascii: "}")
    else { return nil }
    let keyBytes = UnsafeRawBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
    guard bytes[2..<(2 + keyBytes.count)].elementsEqual(keyBytes),
        bytes[(2 + keyBytes.count)..<prefixLength].elementsEqual("\":\"".utf8)
    else { return nil }
    let value = UnsafeRawBufferPointer(rebasing: bytes[prefixLength..<(bytes.count - 2)])
    guard isUnescapedPrintableASCII(value) else { return nil }
    return String(decoding: value, as: UTF8.self)
}

/// Whether every byte is printable ASCII (0x20-0x7E) other than `"` and `\`: eight bytes at a time (a signed
/// transaction is 8 KB, and a byte at a time was 2 % of a purchase replay's CPU).
func isUnescapedPrintableASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
    let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
    // Any byte below n (n <= 128), any byte above 0x7E, any zero byte: the classic exact tests on a word.
    func below(_ word: UInt64, _ n: UInt64) -> Bool { (word &- ones &* n) & ~word & highs != 0 }
    func anyZero(_ word: UInt64) -> Bool { (word &- ones) & ~word & highs != 0 }
    var index = 0
    while index + 8 <= bytes.count {
        let word = bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self)
        if below(word, 0x20) || ((word &+ ones) | word) & highs != 0 || anyZero(word ^ (ones &* 0x22)) || anyZero(word ^ (ones &* 0x5C)) {
            return false
        }
        index += 8
    }
    for byte in bytes[index...] where byte < 0x20 || byte > 0x7E || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return false }
    return true
}

extension GuestSignInRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension RefreshRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension CredentialsRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension ChangePasswordRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension AppleIDNotificationRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension AppleSignInRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension RedeemPurchaseRequest: JSONRequestBody {
    static let integerFields: Set<String> = []

    static func decodeDirectly(_ bytes: UnsafeRawBufferPointer) -> RedeemPurchaseRequest? {
        singleStringField("signedTransaction", in: bytes).map(RedeemPurchaseRequest.init(signedTransaction:))
    }
}

extension AppStoreNotificationRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension ForgotPasswordRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension ResetPasswordRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension VerifyEmailRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension UpdateMeRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension CreateHoldRequest: JSONRequestBody {
    static let integerFields: Set<String> = ["amount", "ttlSeconds"]
}

extension CaptureHoldRequest: JSONRequestBody {
    static let integerFields: Set<String> = ["amount"]
}

extension GrantRequest: JSONRequestBody {
    static let integerFields: Set<String> = ["amount"]
}

extension PremiumRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension ConsumptionConsentRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension ReconcileRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension ReplayNotificationsRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}

extension OfferSignatureRequest: JSONRequestBody {
    static let integerFields: Set<String> = []
}
