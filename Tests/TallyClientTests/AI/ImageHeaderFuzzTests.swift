import Foundation
@testable import TallyAPI
import TallyTestSupport
import Testing

/// The header readers and the base64 view against 100,000 hostile inputs: random bytes behind each format's magic,
/// every truncation of a valid header, and random mutations of valid images (lengths, markers, chunk names). A read
/// past the buffer would trap (Swift checks every index), so "no crash" is "no read past the buffer"; each answer
/// must be a size of at least 1×1 or a refusal.
@Suite("Image headers: 100,000 fuzzed inputs, no crash, a size or a refusal", .timeLimit(.minutes(3)))
struct ImageHeaderFuzzTests {
    static let magics: [[UInt8]] = [
        [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], [0xFF, 0xD8, 0xFF], Array("RIFF\0\0\0\0WEBPVP8 ".utf8),
        Array("RIFF\0\0\0\0WEBPVP8L".utf8), Array("RIFF\0\0\0\0WEBPVP8X".utf8), Array("GIF89a".utf8), Array("GIF87a".utf8), [],
    ]

    static func seeds() -> [[UInt8]] {
        ImageHeader.Format.allCases.flatMap { format in
            (format == .webp ? SyntheticImage.WebPKind.allCases : [.lossy]).map { kind in
                SyntheticImage.bytes(format, width: 1000, height: 700, exifBytes: format == .jpeg ? 300 : 0, webp: kind)
            }
        }
    }

    static func check(_ bytes: [UInt8], _ label: @autoclosure () -> String) -> Bool {
        switch ImageHeader.read(bytes) {
        case .success(let header):
            if header.width < 1 || header.height < 1 {
                Issue.record("\(label()): \(header.width)×\(header.height)")
                return false
            }
            return true
        case .failure: return false
        }
    }

    @Test("Random bytes behind each format's magic")
    func randomBytes() {
        var random = SplitMix64(seed: 0x1AA6E)
        var sizes = 0
        for n in 0..<40_000 {
            let magic = Self.magics[Int(random.next() % UInt64(Self.magics.count))]
            let length = Int(random.next() % 96)
            let bytes = magic + (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            if Self.check(bytes, "random case \(n)") { sizes += 1 }
        }
        #expect(sizes > 0, "some random headers are well-formed enough to measure")
    }

    @Test("Every truncation of every valid header is a refusal or its true size")
    func truncations() throws {
        var cases = 0
        for seed in Self.seeds() {
            let full = try ImageHeader.read(seed).get()
            for length in 0..<seed.count {
                switch ImageHeader.read(Array(seed.prefix(length))) {
                case .success(let header): #expect(header == full, "a cut at \(length) still reads the true size")
                case .failure: break
                }
                cases += 1
            }
        }
        #expect(cases > 500)
    }

    @Test("Random mutations of valid images")
    func mutations() {
        var random = SplitMix64(seed: 0xF022)
        let seeds = Self.seeds()
        for n in 0..<59_000 {
            var bytes = seeds[n % seeds.count]
            for _ in 0..<(1 + Int(random.next() % 4)) {
                let at = Int(random.next() % UInt64(min(bytes.count, 400)))
                switch random.next() % 4 {
                case 0: bytes[at] = UInt8(truncatingIfNeeded: random.next())
                case 1: bytes[at] = [0x00, 0xFF, 0xC0, 0xDA, 0xD9, 0x01, 0x02][Int(random.next() % 7)]
                case 2: bytes.removeSubrange(at..<min(bytes.count, at + Int(random.next() % 32)))
                default: bytes.insert(contentsOf: (0..<Int(random.next() % 8)).map { _ in 0xFF }, at: at)
                }
                if bytes.isEmpty { break }
            }
            _ = Self.check(bytes, "mutation case \(n)")
        }
    }

    @Test("The base64 view decodes every byte as Foundation does and refuses malformed text")
    func base64View() {
        var random = SplitMix64(seed: 64)
        for _ in 0..<1_000 {
            let bytes = (0..<Int(random.next() % 200)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            var text = Array(Data(bytes).base64EncodedString().utf8)
            text.withUnsafeBufferPointer { buffer in
                let view = Base64Bytes(buffer)
                #expect(view.map { [UInt8]($0) } == bytes)
            }
            if !text.isEmpty {
                text[Int(random.next() % UInt64(text.count))] = [UInt8(ascii: "!"), UInt8(ascii: "="), 0, 0xC3][Int(random.next() % 4)]
                text.withUnsafeBufferPointer { buffer in
                    if let view = Base64Bytes(buffer) {
                        // A mutation that is still base64 ("=" at the very end) decodes, in bounds.
                        _ = Array(view)
                    }
                }
            }
        }
    }
}
