import Foundation

/// Takes the upstream's key, and anything shaped like a key, out of a provider's text before the gateway forwards
/// it (an error's message): a provider that quotes the request's `Authorization` header in its error must not hand
/// the server's key to a client, nor to the logs, which only ever see the redacted text.
///
/// Redacted: the configured key wherever it appears; `Bearer`/`Basic` credentials; provider-shaped keys (`sk-…`,
/// `sk_…`, `pk-`, `rk-`, `gsk_`, `xai-`, Google's `AIza…`), masked ones included (`sk-proj-abc***xyz1`); a run of 16
/// or more key characters after a word naming a secret (`key`, `token`, `secret`, `password`, `authorization`,
/// `credential`: `api_key="…"`, `x-api-key: …`, `token=…`); a run of 32 or more hex digits. What a provider says
/// about the request itself (a length, a field, a model's name) is kept.
struct KeyRedaction: Sendable {
    /// The server's key for the upstream, if it has one.
    let key: String?
    /// What a redacted part becomes.
    static let mark = "[redacted]"

    /// `text` without keys.
    func redact(_ text: String) -> String {
        var text = text
        if let key, key.utf8.count >= 8 { text = text.replacingOccurrences(of: key, with: Self.mark) }
        text = text.replacing(#/(?i)\b(bearer|basic)\s+[^\s"',;]+/#) { "\($0.output.1) \(Self.mark)" }
        text = text.replacing(#/(?i)\b(?:sk|pk|rk|gsk|xai)[-_][A-Za-z0-9_\-*.]{6,}|\bAIza[0-9A-Za-z_\-]{20,}/#) { _ in Self.mark }
        text = text.replacing(
            #/(?i)((?:key|token|secret|password|passwd|authorization|credential)s?["']?\s*[:=]?\s*["']?)([A-Za-z0-9+\/_\-.~=]{16,})/#
        ) { "\($0.output.1)\(Self.mark)" }
        text = text.replacing(#/\b[0-9a-fA-F]{32,}\b/#) { _ in Self.mark }
        return text
    }
}
