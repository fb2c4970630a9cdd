import Foundation
import TallyAPI

extension AIClient {
    /// The user's generation `name` of the day (`GET /v1/ai/daily/{name}`): made once per user and local day by
    /// the server (charged then, as its action), the same on every device. Kept in the query cache (and on disk
    /// with a ``CacheStore``) until its ``DailyGeneration/expiresAt``, the user's next local midnight: until then
    /// a call answers from the cache, with no request, even after a relaunch.
    ///
    /// ```swift
    /// let prediction = try await tally.ai.daily("todays_prediction", parameters: ["sign": "leo"])
    /// horoscope = prediction.content
    /// ```
    ///
    /// A call that reaches the server refetches the wallet and quotas where they are observed (the first call of
    /// the day is charged).
    ///
    /// - Parameter parameters: the values the generation's prompt asks for (the server's `params`), sent as the
    ///   query; each set of values has its own generation of the day (and its own charge), cached apart.
    /// - Throws: a ``ClientError``: ``ClientError/Code/insufficientTokens`` or ``ClientError/Code/quotaExhausted``
    ///   with the server's wallet and quotas (confirmed in the cache); ``ClientError/Code/server`` with the status
    ///   404 for a generation the server does not declare, or `upstream_failed` (502: the model failed, nothing
    ///   was charged; the next call tries again); ``ClientError/Code/invalidInput`` for an empty name.
    public func daily(_ name: String, parameters: [String: String] = [:]) async throws -> DailyGeneration {
        guard !name.isEmpty else { throw ClientError(.invalidInput, message: "daily generation name") }
        let query = dailyQuery(name, parameters: parameters)
        if let kept = client.value(query), client.configuration.clock.now < kept.expiresAt {
            client.metrics.recordCacheHit()
            return kept
        }
        client.metrics.recordCacheMiss()
        do {
            let generation = try await client.revalidate(query)
            client.invalidate(key: client.walletQuery.key)
            client.invalidate(key: client.quotasQuery.key)
            return generation
        } catch let error as ClientError {
            let confirmations = client.refusalConfirmations(error)
            if !confirmations.isEmpty { client.confirm(confirmations) }
            throw error
        }
    }

    /// The cached daily generation `name` for `parameters`, to observe (`client.observe`, `ObservedQuery`) rather than
    /// call ``daily(_:parameters:)``. Its key is the name and the parameters (the server makes one generation per name,
    /// parameters and day). It is fresh until the generation's ``DailyGeneration/expiresAt``, the user's next local
    /// midnight: an observer open at that moment refetches it then, and one that starts, or an app that returns to
    /// the foreground, after it refetches it (the server answers from what it stored, never charging twice in a
    /// day). So a screen left open over midnight, or brought back the next morning, shows the new day's, and one
    /// brought back the same evening makes no request.
    public func dailyQuery(_ name: String, parameters: [String: String] = [:]) -> Query<DailyGeneration> {
        let escaped = name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"])) ?? ""
        let query = parameters.isEmpty ? "" : "?" + parameters.sorted { $0.key < $1.key }
            .map { "\(Self.queryEscaped($0.key))=\(Self.queryEscaped($0.value))" }.joined(separator: "&")
        return Query(
            key: "ai.daily/\(name)\(query)", path: "/v1/ai/daily/\(escaped)\(query)", operation: "GET /v1/ai/daily/{name}",
            staleAfter: 86_400, maxAge: 2 * 86_400, freshUntil: { $0.expiresAt })
    }

    /// `text` with everything but unreserved characters (RFC 3986) percent-encoded.
    private static func queryEscaped(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    private static let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
}
