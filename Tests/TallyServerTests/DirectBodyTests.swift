import Foundation
import TallyAPI
import Testing

@testable import TallyServer

/// A one-field body read without `JSONDecoder` (``singleStringField(_:in:)``) must read exactly what `JSONDecoder`
/// reads, and leave every other form to it.
@Suite("Bodies read directly", .timeLimit(.minutes(1)))
struct DirectBodyTests {
    static func direct(_ body: String) -> RedeemPurchaseRequest? {
        Array(body.utf8).withUnsafeBytes { RedeemPurchaseRequest.decodeDirectly($0) }
    }

    @Test("The form an SDK sends is read as JSONDecoder reads it")
    func canonical() throws {
        let jws = "eyJhbGciOiJFUzI1NiJ9.eyJ0cmFuc2FjdGlvbklkIjoiMSJ9.c2lnbmF0dXJlLV8"
        let body = try String(decoding: TallyJSON.encoder().encode(RedeemPurchaseRequest(signedTransaction: jws)), as: UTF8.self)
        let decoded = try JSONResponse.decoder.decode(RedeemPurchaseRequest.self, from: Data(body.utf8))
        #expect(Self.direct(body) == decoded)
        #expect(Self.direct(body)?.signedTransaction == jws)
    }

    @Test("Every other form is left to JSONDecoder", arguments: [
        #"{"signedTransaction": "abc"}"#, #"{ "signedTransaction":"abc"}"#, #"{"signedTransaction":"a\/b"}"#,
        #"{"signedTransaction":"a\u0062"}"#, #"{"signedTransactio":"abc"}"#, #"{"signedTransactionX":"abc"}"#,
        #"{"signedTransaction":"abc","x":1}"#, #"{"signedTransaction":""}"#, "{\"signedTransaction\":\"é\"}",
        "{\"signedTransaction\":\"a\tb\"}", #"{"signedTransaction":"abc"} "#, #"["signedTransaction","abc"]"#, "{}", "",
    ])
    func otherForms(_ body: String) {
        #expect(Self.direct(body) == nil)
    }

    @Test("The word-at-a-time check agrees with the byte-at-a-time one: every byte value at every place of a word and the tail")
    func printableCheck() {
        func plain(_ byte: UInt8) -> Bool { (0x20...0x7E).contains(byte) && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") }
        for length in [1, 7, 8, 9, 16, 21] {
            for place in 0..<length {
                for byte in UInt8.min...UInt8.max {
                    var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    bytes[place] = byte
                    let fast = bytes.withUnsafeBytes { isUnescapedPrintableASCII($0) }
                    #expect(fast == plain(byte), "byte \(byte) at \(place) of \(length)")
                }
            }
        }
        #expect([UInt8]().withUnsafeBytes { isUnescapedPrintableASCII($0) })
    }
}
