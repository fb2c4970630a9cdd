import Foundation
import Synchronization
import TallyAPI
import TallyStore

/// A model's prompt tokens when no usage comes (the client left mid-stream, the upstream cut off), estimated from
/// the usage of the model's completed calls: a pure value (no clock, no I/O) that ``PromptEstimates`` keeps per
/// model in this process.
///
/// **Why features, not one ratio.** English, Japanese and code differ in tokens per byte (0.25, 0.39 and 0.33 for
/// GPT-4's tokenizer on the tests' prompt samples): one ratio per model, taken at a high percentile over a mix,
/// charges English at Japanese's rate (up to 2.07× its real count with `tally-dev dev-llm`). A prompt is described instead by
/// what a GPT-style pre-tokenizer cuts text by (``Features``: bytes and runs of ASCII letters and digits, ASCII
/// symbols, whitespace, 2-byte and 3-to-4-byte UTF-8 scalars, and messages), and the model's rate per feature is
/// learned.
///
/// **The fit.** Robust least squares (Huber's weights) over the last ``window`` completed calls, each call's error
/// taken relative to its byte bound (so each call counts once whatever its size) and bounded in its influence (so
/// one absurdly counted call cannot steer the rates), rates kept non-negative and pulled weakly (``priorWeight``)
/// toward the byte bound's own rates, so a class of bytes the model has not been seen with is estimated at the
/// bound's rate, never at zero.
///
/// **The estimate** is the fitted count times the ``percentile`` of the calls' real-to-fitted ratios (so 9 in 10
/// calls like those seen are charged at least their real count), rounded up; never below ``floor(bound:)`` (an
/// eighth of the byte bound: whatever prompts others send, a cancelled call is never cheaper than that), never
/// above the bound; the bound itself until ``minimumCalls`` calls were seen.
struct PromptEstimator: Sendable {
    /// What the estimate is computed from: counts over the text that reaches the model.
    struct Features: Sendable, Hashable {
        /// ASCII letters and digits, in bytes.
        var alphanumerics = 0
        /// Runs of ASCII letters and digits (words, identifiers, numbers).
        var words = 0
        /// Other ASCII characters that are not whitespace (punctuation, operators), in bytes.
        var symbols = 0
        /// ASCII whitespace, in bytes.
        var spaces = 0
        /// Scalars of two UTF-8 bytes (accented Latin, Greek, Cyrillic, Hebrew, Arabic).
        var twoByteScalars = 0
        /// Scalars of three or four UTF-8 bytes (Japanese, Chinese, Korean, Thai, emoji).
        var longScalars = 0
        /// Messages (each is framed by its chat template).
        var messages = 0
        /// The prompt's byte bound (``PromptBound``): what is held for it.
        var bound = 0

        /// The features of a Chat Completions body: each message's role, name and text (a string or text parts;
        /// image parts are left out: their tokens are known exactly, and their base64 is not text), the JSON of its
        /// other fields (tool calls), and the JSON of ``PromptBound/promptFields`` (tools, formats); `bound` is the
        /// text's ``PromptBound`` (computed, image parts included, when not given).
        init(request body: [JSONKey: JSONValue], bound: Int? = nil) {
            if case .array(let messages)? = body["messages"] {
                for message in messages {
                    self.messages += 1
                    guard let fields = message.objectValue else {
                        add(message.bytes)
                        continue
                    }
                    for (name, value) in fields {
                        switch (name, value) {
                        case (_, .string(let text)): add(Array(text.utf8))
                        case ("content", .array(let parts)):
                            for part in parts where part["type"] != .string("image_url") {
                                add(part["text"]?.stringValue.map { Array($0.utf8) } ?? part.bytes)
                            }
                        case (_, .null): break
                        default: add(value.bytes)
                        }
                    }
                }
            }
            for field in PromptBound.promptFields { if let value = body[field] { add(value.bytes) } }
            self.bound = bound ?? PromptBound.tokens(request: body)
        }

        /// Features from counts (tests).
        init(
            alphanumerics: Int = 0, words: Int = 0, symbols: Int = 0, spaces: Int = 0, twoByteScalars: Int = 0,
            longScalars: Int = 0, messages: Int = 1, bound: Int
        ) {
            (self.alphanumerics, self.words, self.symbols, self.spaces) = (alphanumerics, words, symbols, spaces)
            (self.twoByteScalars, self.longScalars, self.messages, self.bound) = (twoByteScalars, longScalars, messages, bound)
        }

        /// Counts `bytes` (UTF-8) in.
        private mutating func add(_ bytes: [UInt8]) {
            var inWord = false
            for byte in bytes {
                switch byte {
                case 0x30...0x39, 0x41...0x5A, 0x61...0x7A:
                    alphanumerics += 1
                    if !inWord { words += 1 }
                    inWord = true
                    continue
                case 0x09...0x0D, 0x20: spaces += 1
                case 0x00...0x7F: symbols += 1
                case 0xC0...0xDF: twoByteScalars += 1
                case 0xE0...0xFF: longScalars += 1
                default: break  // a continuation byte: its scalar was counted at its first byte
                }
                inWord = false
            }
        }

        /// The counts the rates apply to, in ``PromptEstimator/boundRates``' order.
        var vector: [Double] {
            [alphanumerics, words, symbols, spaces, twoByteScalars, longScalars, messages].map(Double.init)
        }
    }

    /// One completed call: its prompt's features and the tokens the provider counted.
    struct Observation: Sendable, Hashable {
        var features: Features
        var tokens: Int
    }

    /// The learned rates, and the ratio the fitted count is multiplied by.
    struct Fit: Sendable, Hashable {
        /// Tokens per unit of each feature, in ``Features/vector``'s order.
        var rates: [Double]
        /// The ``PromptEstimator/percentile`` of the calls' real-to-fitted ratios.
        var ratio: Double

        /// The fitted count of `features`, before the ratio.
        func fitted(_ features: Features) -> Double { zip(rates, features.vector).reduce(0) { $0 + $1.0 * $1.1 } }
    }

    /// Calls seen before the estimate replaces the byte bound.
    static let minimumCalls = 20
    /// Calls the rates are learned from: the latest, so a model whose provider changed its tokenizer is relearned.
    static let window = 256
    /// The share of calls like those seen that are charged at least their real count.
    static let percentile = 0.9
    /// How strongly the rates are pulled toward ``boundRates`` (relative to one call whose prompt is all of a feature).
    static let priorWeight = 1e-4
    /// The byte bound's rates per feature: a byte each (a word adds nothing on top of its bytes), a 2-byte scalar 2,
    /// a longer one 4, a message ``PromptBound/tokensPerMessage``.
    static let boundRates: [Double] = [1, 0, 1, 1, 2, 4, Double(PromptBound.tokensPerMessage)]
    /// The floor is this fraction of the byte bound. Natural text is far above it: English, the cheapest per byte,
    /// is about a quarter of a token per byte in GPT-4's tokenizer, and the bound counts every byte.
    static let floorDivisor = 8

    /// The calls learned from, oldest first once the window is full (a ring: ``next`` is the oldest).
    private(set) var observations: [Observation] = []
    private var next = 0

    /// A model that has seen no call.
    init() {}

    /// The least a prompt of byte bound `bound` is estimated at.
    static func floor(bound: Int) -> Int { (bound + floorDivisor - 1) / floorDivisor }

    /// Learns from a completed call whose prompt has `features` and was counted `promptTokens` by the provider (at
    /// most its bound: a provider that counts more than one token a byte is not a byte-level tokenizer, and its
    /// count cannot raise the estimate above the bound anyway).
    mutating func learn(_ features: Features, promptTokens: Int) {
        guard features.bound > 0 else { return }
        let observation = Observation(features: features, tokens: min(max(promptTokens, 0), features.bound))
        if observations.count < Self.window {
            observations.append(observation)
        } else {
            observations[next] = observation
            next = (next + 1) % Self.window
        }
    }

    /// The prompt tokens a call of `features` is charged when no usage comes.
    func estimate(_ features: Features) -> Int { Self.estimate(features, fit: fit) }

    /// The estimate of `features` by `fit` (``fit``, computed once for many estimates; `nil`: the bound).
    static func estimate(_ features: Features, fit: Fit?) -> Int {
        guard let fit else { return features.bound }
        let estimate = (fit.ratio * fit.fitted(features)).rounded(.up)
        let floor = Self.floor(bound: features.bound)
        guard estimate.isFinite, estimate < Double(features.bound) else { return features.bound }
        return max(Int(saturating: estimate), floor)
    }

    /// The rates and ratio learned so far; `nil` before ``minimumCalls`` calls.
    var fit: Fit? {
        guard observations.count >= Self.minimumCalls else { return nil }
        // Each call's counts and tokens relative to its bound, so every call weighs the same whatever its size.
        let rows = observations.map { observation in
            let scale = 1 / Double(observation.features.bound)
            return (x: observation.features.vector.map { $0 * scale }, y: Double(observation.tokens) * scale)
        }
        // Huber's weights, by iteratively reweighted least squares: a call whose error is beyond 1.5 robust standard
        // deviations weighs in proportion to the inverse of its error, so no call, however absurdly counted, moves
        // the rates by more than a bounded amount.
        var weights = [Double](repeating: 1, count: rows.count)
        var rates = Self.boundRates
        for _ in 0..<8 {
            rates = Self.solve(rows, weights: weights, from: rates)
            let errors = rows.map { row in abs(row.y - zip(rates, row.x).reduce(0) { $0 + $1.0 * $1.1 }) }
            let scale = max(1.4826 * Self.median(errors), 1e-3)
            weights = errors.map { min(1, 1.5 * scale / max($0, 1e-12)) }
        }
        var fit = Fit(rates: rates, ratio: 1)
        let ratios = observations.map { Double($0.tokens) / max(fit.fitted($0.features), 1) }.sorted()
        fit.ratio = ratios[max(Int(saturating: Self.percentile * Double(ratios.count), rounding: .up) - 1, 0)]
        return fit
    }

    /// The non-negative rates minimizing Σ wᵢ (yᵢ − rates·xᵢ)² + λ |rates − ``boundRates``|², by coordinate descent on
    /// the normal equations (which converges: their matrix is positive definite), starting from `start`.
    private static func solve(_ rows: [(x: [Double], y: Double)], weights: [Double], from start: [Double]) -> [Double] {
        let count = boundRates.count
        var gram = [Double](repeating: 0, count: count * count)
        var moment = boundRates.map { $0 * priorWeight }
        for (row, weight) in zip(rows, weights) {
            for i in 0..<count {
                moment[i] += weight * row.x[i] * row.y
                for j in 0..<count { gram[i * count + j] += weight * row.x[i] * row.x[j] }
            }
        }
        for i in 0..<count { gram[i * count + i] += priorWeight }
        var rates = start
        for _ in 0..<500 {
            var change = 0.0
            for i in 0..<count {
                var rest = moment[i]
                for j in 0..<count where j != i { rest -= gram[i * count + j] * rates[j] }
                let rate = max(0, rest / gram[i * count + i])
                change = max(change, abs(rate - rates[i]))
                rates[i] = rate
            }
            if change < 1e-12 { break }
        }
        return rates
    }

    private static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }
}

/// Each gateway model's ``PromptEstimator``, learned from this process's completed calls, with its fit kept until the
/// next call is learned (many cancellations at once compute it once).
final class PromptEstimates: Sendable {
    private struct Model {
        var estimator = PromptEstimator()
        /// Calls learned so far (which fit is whose).
        var learned = 0
        var fit: PromptEstimator.Fit??
    }

    private let models = Mutex<[String: Model]>([:])

    /// Learns from `request`, which the provider counted `promptTokens`: its text's rate, the images' tokens (known
    /// by the model's rule) taken out.
    func learn(_ request: ChatRequest, promptTokens: Int) {
        let textTokens = max(promptTokens - request.measure.imageTokens, 0)
        models.withLock { models in
            var model = models[request.model.name, default: Model()]
            model.estimator.learn(request.textFeatures, promptTokens: textTokens)
            model.learned += 1
            model.fit = nil
            models[request.model.name] = model
        }
    }

    /// The prompt tokens `request` is charged when no usage came: its text as estimated, and its images' tokens
    /// exactly; the whole bound until the model has completed ``PromptEstimator/minimumCalls`` calls.
    func estimate(_ request: ChatRequest) -> Int {
        guard let model = models.withLock({ $0[request.model.name] }),
            model.estimator.observations.count >= PromptEstimator.minimumCalls
        else { return request.promptBound }
        let fit: PromptEstimator.Fit?
        if let known = model.fit {
            fit = known
        } else {
            fit = model.estimator.fit
            models.withLock { models in
                // Unless a call was learned meanwhile.
                if models[request.model.name]?.learned == model.learned { models[request.model.name]?.fit = .some(fit) }
            }
        }
        let (total, overflow) = PromptEstimator.estimate(request.textFeatures, fit: fit).addingReportingOverflow(request.measure.imageTokens)
        return overflow ? request.promptBound : min(total, request.promptBound)
    }
}
