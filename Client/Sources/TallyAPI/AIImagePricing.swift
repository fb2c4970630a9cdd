import Foundation

/// How much detail a model is asked to see in an image (`image_url.detail`): `auto` is priced as `high`.
public enum ImageDetail: String, Codable, Sendable, Hashable, CaseIterable {
    /// A fixed, small price (a 512-px view).
    case low
    /// Priced by the image's size.
    case high
    /// The provider chooses; held and estimated as `high`, the dearer.
    case auto
}

/// What an image costs a model, in prompt tokens, from its pixel size alone (`ai.models[].images` in the
/// configuration; listed by `GET /v1/ai/models`, so an app prices an image exactly as the gateway holds it).
///
/// Two rules, as providers document them:
/// - **tiles** (OpenAI's GPT-4o family): `low` costs `lowDetailTokens`; `high`/`auto` scale the image down to fit
///   within `fitWithin`², then so that its shortest side is at most `shortestSide`, and cost
///   `baseTokens + tileTokens × ⌈w / tileSize⌉ × ⌈h / tileSize⌉` (1024×1024 → 765; 2048×768 → 1,445 with
///   85/170/512/2048/768).
/// - **patches** (GPT-4.1-mini and later): the `patchSize`-px patches covering the image, scaled down to at most
///   `maxPatches`, times `patchMultiplier`, rounded up; `low` costs `lowDetailTokens` when set.
public struct AIImageRule: Codable, Sendable, Hashable {
    /// How an image's size becomes tokens.
    public enum Sizing: Sendable, Hashable {
        /// 512-px tiles after two downscales.
        case tiles(baseTokens: Int, tileTokens: Int, tileSize: Int, fitWithin: Int, shortestSide: Int)
        /// Patches up to a cap, times a multiplier.
        case patches(patchSize: Int, maxPatches: Int, multiplier: Double)
    }

    /// The price of a `low` detail image (tiles: required; patches: nil prices `low` like `high`).
    public var lowDetailTokens: Int?
    /// The rule for `high` and `auto`.
    public var sizing: Sizing
    /// The most image parts one request may carry.
    public var maxPerRequest: Int
    /// The largest image, decoded, in bytes.
    public var maxBytes: Int
    /// Hosts whose `https` image URLs are taken (held at the costliest image); empty: only `data:` URLs.
    public var allowedURLHosts: [String]

    /// A rule; the defaults are OpenAI's tile prices for GPT-4o mini's family, 8 images of 10 MiB, no URLs.
    public init(
        sizing: Sizing = .tiles(baseTokens: 85, tileTokens: 170, tileSize: 512, fitWithin: 2048, shortestSide: 768),
        lowDetailTokens: Int? = 85, maxPerRequest: Int = 8, maxBytes: Int = 10 << 20, allowedURLHosts: [String] = []
    ) {
        (self.sizing, self.lowDetailTokens, self.maxPerRequest) = (sizing, lowDetailTokens, maxPerRequest)
        (self.maxBytes, self.allowedURLHosts) = (maxBytes, allowedURLHosts)
    }

    /// The prompt tokens of a `width`×`height` image seen at `detail`.
    public func tokens(width: Int, height: Int, detail: ImageDetail) -> Int {
        if detail == .low, let lowDetailTokens { return lowDetailTokens }
        switch sizing {
        case .tiles(let base, let tile, let tileSize, _, _):
            let (scaledWidth, scaledHeight, denominator) = tileScale(width: width, height: height)
            let across = Self.ceilDivide(scaledWidth, denominator * tileSize)
            let down = Self.ceilDivide(scaledHeight, denominator * tileSize)
            let tiles = Self.saturating(across, down, multiply: true)
            return Self.saturating(base, Self.saturating(tile, tiles, multiply: true), multiply: false)
        case .patches(let size, _, let multiplier):
            let (across, down) = patchGrid(width: width, height: height, patchSize: size)
            return Self.rounded(Double(across) * Double(down) * multiplier)
        }
    }

    /// The most any image can cost at `detail`: what an image behind a URL (whose size is unknown before the call)
    /// is held at.
    public func costliestTokens(detail: ImageDetail) -> Int {
        if detail == .low, let lowDetailTokens { return lowDetailTokens }
        switch sizing {
        case .tiles(let base, let tile, let tileSize, let fitWithin, let shortestSide):
            let tiles = Self.ceilDivide(fitWithin, tileSize) * Self.ceilDivide(shortestSide, tileSize)
            return Self.saturating(base, Self.saturating(tile, tiles, multiply: true), multiply: false)
        case .patches(_, let maxPatches, let multiplier):
            return Self.rounded(Double(maxPatches) * multiplier)
        }
    }

    /// The size the model sees a `width`×`height` image at (`high`): pixels beyond it are scaled away by the
    /// provider, so an app may downscale to it before uploading without changing the price.
    public func scaledSize(width: Int, height: Int) -> (width: Int, height: Int) {
        switch sizing {
        case .tiles:
            let (scaledWidth, scaledHeight, denominator) = tileScale(width: width, height: height)
            return (max(1, Self.ceilDivide(scaledWidth, denominator)), max(1, Self.ceilDivide(scaledHeight, denominator)))
        case .patches(let size, let maxPatches, _):
            guard let factor = patchShrink(width: width, height: height, patchSize: size, maxPatches: maxPatches) else { return (width, height) }
            // Down, not up: a side rounded up could cover one more patch column than the model's own resize does.
            return (max(1, Self.whole(Double(width) * factor, .down)), max(1, Self.whole(Double(height) * factor, .down)))
        }
    }

    // The tile rule's scaled size as exact fractions: (width × n, height × n, d) with the scale n / d.
    private func tileScale(width: Int, height: Int) -> (Int, Int, Int) {
        guard case .tiles(_, _, _, let fitWithin, let shortestSide) = sizing else { return (width, height, 1) }
        let (w, h) = (max(width, 1), max(height, 1))
        var (numerator, denominator) = (1, 1)
        if max(w, h) > fitWithin { (numerator, denominator) = (fitWithin, max(w, h)) }
        // The shortest side after the first scale: min × n / d; beyond `shortestSide`, the whole scale is shortest / min.
        if min(w, h) * numerator > shortestSide * denominator { (numerator, denominator) = (shortestSide, min(w, h)) }
        return (w * numerator, h * numerator, denominator)
    }

    // The patch rule: the grid covering the image, scaled down to at most `maxPatches` patches when it exceeds them.
    private func patchGrid(width: Int, height: Int, patchSize: Int) -> (Int, Int) {
        guard case .patches(_, let maxPatches, _) = sizing else { return (0, 0) }
        let (w, h) = (max(width, 1), max(height, 1))
        guard let factor = patchShrink(width: w, height: h, patchSize: patchSize, maxPatches: maxPatches) else {
            return (Self.ceilDivide(w, patchSize), Self.ceilDivide(h, patchSize))
        }
        // A hair below each whole patch count, so a dimension the shrink put exactly on a patch edge is not counted
        // one over by rounding.
        let across = Self.whole(Double(w) * factor / Double(patchSize) - 1e-9, .up)
        let down = Self.whole(Double(h) * factor / Double(patchSize) - 1e-9, .up)
        return (max(across, 1), max(down, 1))
    }

    // The downscale of the patch rule (nil: none): √(size² × max / (w × h)), then lowered until both sides hold a
    // whole number of patches, as OpenAI documents.
    private func patchShrink(width w: Int, height h: Int, patchSize: Int, maxPatches: Int) -> Double? {
        guard Self.ceilDivide(w, patchSize) * Self.ceilDivide(h, patchSize) > maxPatches else { return nil }
        let size = Double(patchSize)
        var factor = (size * size * Double(maxPatches) / (Double(w) * Double(h))).squareRoot()
        let across = Double(w) * factor / size, down = Double(h) * factor / size
        factor *= min(across.rounded(.down) / across, down.rounded(.down) / down)
        return factor
    }

    private static func ceilDivide(_ value: Int, _ divisor: Int) -> Int {
        guard divisor > 0 else { return 0 }
        return value / divisor + (value % divisor == 0 ? 0 : 1)
    }

    private static func saturating(_ a: Int, _ b: Int, multiply: Bool) -> Int {
        let (value, overflow) = multiply ? a.multipliedReportingOverflow(by: b) : a.addingReportingOverflow(b)
        return overflow ? .max : value
    }

    // Rounded up, but a product that is whole save for the multiplier's binary error (300 × 1.62 is 486.00000000000006
    // in doubles) is that whole number.
    private static func rounded(_ tokens: Double) -> Int {
        let whole = tokens.rounded()
        return max(0, Self.whole(abs(tokens - whole) <= 4 * whole.ulp ? whole : tokens, .up))
    }

    // `value` rounded by `rule`, total: NaN is 0, and what lies beyond 10¹⁵ (no image costs that) is 10¹⁵.
    private static func whole(_ value: Double, _ rule: FloatingPointRoundingRule) -> Int {
        let limit = 1_000_000_000_000_000
        guard !value.isNaN else { return 0 }
        return Int(exactly: min(max(value.rounded(rule), -Double(limit)), Double(limit))) ?? 0
    }
}

extension AIImageRule {
    private enum CodingKeys: String, CodingKey {
        case lowDetailTokens, baseTokens, tileTokens, tileSize, fitWithin, shortestSide, patchSize, maxPatches, patchMultiplier
        case maxPerRequest, maxBytes, allowedURLHosts
    }

    /// Decodes the flat form of the configuration and of `GET /v1/ai/models`: the tile keys, or `patchSize`,
    /// `maxPatches` and `patchMultiplier`; the limits default as in ``init(sizing:lowDetailTokens:maxPerRequest:maxBytes:allowedURLHosts:)``.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let sizing: Sizing
        if let patchSize = try c.decodeIfPresent(Int.self, forKey: .patchSize) {
            let tileKeys: [CodingKeys] = [.baseTokens, .tileTokens, .tileSize, .fitWithin, .shortestSide]
            if let key = tileKeys.first(where: c.contains) {
                throw DecodingError.dataCorruptedError(
                    forKey: key, in: c, debugDescription: "a patch-priced model takes no \(key.stringValue) (tiles or patches, not both)")
            }
            sizing = .patches(
                patchSize: patchSize, maxPatches: try c.decode(Int.self, forKey: .maxPatches),
                multiplier: try c.decode(Double.self, forKey: .patchMultiplier))
        } else {
            if let key = [CodingKeys.maxPatches, .patchMultiplier].first(where: c.contains) {
                throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: "\(key.stringValue) needs patchSize")
            }
            sizing = .tiles(
                baseTokens: try c.decodeIfPresent(Int.self, forKey: .baseTokens) ?? 85,
                tileTokens: try c.decodeIfPresent(Int.self, forKey: .tileTokens) ?? 170,
                tileSize: try c.decodeIfPresent(Int.self, forKey: .tileSize) ?? 512,
                fitWithin: try c.decodeIfPresent(Int.self, forKey: .fitWithin) ?? 2048,
                shortestSide: try c.decodeIfPresent(Int.self, forKey: .shortestSide) ?? 768)
        }
        let isTiles = if case .tiles = sizing { true } else { false }
        self.init(
            sizing: sizing, lowDetailTokens: try c.decodeIfPresent(Int.self, forKey: .lowDetailTokens) ?? (isTiles ? 85 : nil),
            maxPerRequest: try c.decodeIfPresent(Int.self, forKey: .maxPerRequest) ?? 8,
            maxBytes: try c.decodeIfPresent(Int.self, forKey: .maxBytes) ?? 10 << 20,
            allowedURLHosts: try c.decodeIfPresent([String].self, forKey: .allowedURLHosts) ?? [])
    }

    /// Encodes the flat form.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(lowDetailTokens, forKey: .lowDetailTokens)
        switch sizing {
        case .tiles(let base, let tile, let tileSize, let fitWithin, let shortestSide):
            try c.encode(base, forKey: .baseTokens)
            try c.encode(tile, forKey: .tileTokens)
            try c.encode(tileSize, forKey: .tileSize)
            try c.encode(fitWithin, forKey: .fitWithin)
            try c.encode(shortestSide, forKey: .shortestSide)
        case .patches(let size, let maxPatches, let multiplier):
            try c.encode(size, forKey: .patchSize)
            try c.encode(maxPatches, forKey: .maxPatches)
            try c.encode(multiplier, forKey: .patchMultiplier)
        }
        try c.encode(maxPerRequest, forKey: .maxPerRequest)
        try c.encode(maxBytes, forKey: .maxBytes)
        try c.encode(allowedURLHosts, forKey: .allowedURLHosts)
    }
}
