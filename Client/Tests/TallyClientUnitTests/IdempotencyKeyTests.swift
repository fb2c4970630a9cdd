import Foundation
import TallyAPI
@testable import TallyClient
import Testing

/// The SDK's own SHA-256 against published and `sha256sum` digests, and the keys derived with it.
@Suite("Idempotency keys", .timeLimit(.minutes(1)))
struct IdempotencyKeyTests {
    @Test(
        "SHA-256 matches known digests across the padding boundaries",
        arguments: [
            ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
            (String(repeating: "a", count: 55), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"),
            (String(repeating: "a", count: 56), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"),
            (String(repeating: "a", count: 63), "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"),
            (String(repeating: "a", count: 64), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"),
            (String(repeating: "a", count: 65), "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"),
            (String(repeating: "a", count: 119), "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"),
            (String(repeating: "a", count: 1000), "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"),
            (String(repeating: "a", count: 1_000_000), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
        ])
    func knownDigests(message: String, digest: String) {
        #expect(SHA256.hex(Array(message.utf8)) == digest)
    }

    @Test("A key is 64 hexadecimal digits, the same for the same request and intent, different for any other")
    func keysAreScopedToTheWholeRequest() {
        func key(_ method: String = "POST", _ path: String = "/v1/actions/ai.query", _ body: Data? = nil, _ intent: String = "m-1") -> String {
            IdempotencyKey.derive(method: method, path: path, body: body, intent: intent)
        }
        let base = key()
        #expect(base.count == 64 && base.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        #expect(key() == base && key("post") == base && key("POST", "/v1/actions/ai.query", Data()) == base)
        let others = [
            key("PATCH"), key("POST", "/v1/actions/reading"), key("POST", "/v1/actions/ai.query", Data("{}".utf8)),
            key("POST", "/v1/actions/ai.query", nil, "m-2"),
            // Fields are length-prefixed: moving bytes from one field to the next is another request.
            key("POST", "/v1/actions/ai.querym", nil, "-1"), key("POST", "/v1/actions/ai.", Data("query".utf8)),
        ]
        #expect(Set(others + [base]).count == others.count + 1)
    }

    @Test("A mutation without an intent is an intent of its own, kept by its copies; its key still follows the request")
    func mutationKeys() {
        let own = Mutation<Wallet>(method: "POST", path: "/v1/wallet/holds")
        var copy = own
        #expect(own.idempotencyKey == copy.idempotencyKey)
        #expect(own.idempotencyKey != Mutation<Wallet>(method: "POST", path: "/v1/wallet/holds").idempotencyKey)
        copy.body = Data(#"{"amount":10}"#.utf8)
        #expect(own.idempotencyKey != copy.idempotencyKey)
        var meant = own
        meant.intent = "hold for message 9"
        #expect(meant.idempotencyKey == IdempotencyKey.derive(method: "POST", path: "/v1/wallet/holds", body: nil, intent: "hold for message 9"))
    }
}
