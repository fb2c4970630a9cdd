import TallyAPI

/// The local model's deterministic answers and token counts: the same request always gets the same words,
/// so tests and demos can predict what streams back.
public enum DevAnswer {
    /// Tokens the local model adds per message (role and framing), as real chat models do.
    public static let tokensPerMessage = 4

    /// The prompt's tokens as the local model bills them: ``count(text:)`` of each message's role and text, plus
    /// ``tokensPerMessage`` a message. Never more than the prompt's UTF-8 bytes plus the per-message overhead, the
    /// bound a byte-level BPE tokenizer keeps too.
    public static func promptTokens(_ messages: [ChatMessage]) -> Int {
        messages.reduce(0) { $0 + tokensPerMessage + count(text: $1.role) + count(text: $1.content) }
    }

    /// The tokens of `text`, about as GPT-4's tokenizer (cl100k) counts them: its pre-tokenizer cuts text into runs
    /// of letters, of digits and of punctuation, and its vocabulary holds most words whole. So a run of ASCII letters
    /// is one token per 8 letters begun, a run of ASCII digits one per 3 (cl100k splits numbers so), a run of other
    /// ASCII symbols one per 2, whitespace nothing, and every other scalar (a Japanese character, an accented
    /// letter, an emoji) one. On 30 English, Japanese and code prompts this counts 1.01, 0.93 and 0.97 times what
    /// cl100k counts (0.25, 0.36 and 0.32 tokens per byte).
    public static func count(text: String) -> Int {
        var tokens = 0
        var run: (kind: RunKind, length: Int)?
        for scalar in text.unicodeScalars {
            let kind = RunKind(scalar)
            if let current = run, current.kind == kind {
                run = (kind, current.length + 1)
            } else {
                if let current = run { tokens += current.kind.tokens(current.length) }
                run = (kind, 1)
            }
        }
        if let current = run { tokens += current.kind.tokens(current.length) }
        return tokens
    }

    /// The classes of scalars ``count(text:)`` counts by runs.
    enum RunKind: Equatable {
        case letters, digits, symbols, space, other

        init(_ scalar: Unicode.Scalar) {
            if scalar.properties.isWhitespace {
                self = .space
            } else if !scalar.isASCII {
                self = .other
            } else if ("0"..."9").contains(scalar) {
                self = .digits
            } else if ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) {
                self = .letters
            } else {
                self = .symbols
            }
        }

        /// The tokens of a run of `length` scalars of this kind.
        func tokens(_ length: Int) -> Int {
            switch self {
            case .letters: return (length + 7) / 8
            case .digits: return (length + 2) / 3
            case .symbols: return (length + 1) / 2
            case .space: return 0
            case .other: return length
            }
        }
    }

    /// The answer's tokens (each one word, the first without a leading space): `preface` (what the model says of the
    /// request's images), then as many words as the prompt's hash asks (20 to 59), or `length` when set; all cut at
    /// `limit` (the request's `max_tokens`); `truncated` when the limit cut it (finish reason `length`).
    public static func words(for messages: [ChatMessage], length: Int?, limit: Int?, preface: [String] = []) -> (words: [String], truncated: Bool) {
        var seed = messages.reduce(UInt64(0xcbf2_9ce4_8422_2325)) { hash, message in
            (message.role + "\u{0}" + message.content + "\u{0}").utf8.reduce(hash) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
        }
        let wanted = preface.count + (length ?? 20 + Int(seed % 40))
        let count = min(wanted, max(limit ?? wanted, 0))
        var words = Array(preface.prefix(count))
        words.reserveCapacity(count)
        for index in words.count..<count {
            seed = seed &+ 0x9e37_79b9_7f4a_7c15
            var mixed = seed
            mixed = (mixed ^ (mixed >> 30)) &* 0xbf58_476d_1ce4_e5b9
            mixed = (mixed ^ (mixed >> 27)) &* 0x94d0_49bb_1331_11eb
            mixed ^= mixed >> 31
            let word = vocabulary[Int(mixed % UInt64(vocabulary.count))]
            words.append(index == 0 ? word.capitalized : " " + word)
        }
        return (words, count < wanted)
    }

    private static let vocabulary = [
        "the", "stars", "favour", "patience", "today", "and", "a", "quiet", "change", "arrives", "through", "an", "old",
        "friend", "so", "keep", "your", "plans", "light", "while", "the", "moon", "moves", "into", "your", "house", "of",
        "work", "trust", "what", "you", "already", "know", "small", "steps", "count", "more", "than", "big", "promises",
    ]
}

extension String {
    fileprivate var capitalized: String { prefix(1).uppercased() + dropFirst() }
}
