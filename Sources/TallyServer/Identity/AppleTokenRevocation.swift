import Logging
import TallyAPI
import TallyAppleID
import TallyStore

extension StoredSecrets {
    /// The purpose Apple's refresh tokens are sealed for.
    static let appleRefreshToken = "apple-refresh-token"
}

/// Revokes an account's Apple refresh token at Apple before the account goes (App Store guideline 5.1.1(v)), whoever
/// deletes it: the user (`DELETE /v1/me`) or an operator (the console).
struct AppleTokenRevocation: Sendable {
    /// Sign in with Apple's token client; nil without its token settings (nothing is revoked then).
    let client: AppleTokenClient?
    /// Where the sealed refresh tokens are.
    let store: any TallyStorage
    /// Opens the sealed refresh tokens.
    let storedSecrets: StoredSecrets
    let clock: any TallyClock

    /// Revokes the account's Apple refresh token. Apple unreachable or refusing is logged, and the deletion goes on: it
    /// was asked for. Nothing happens without Sign in with Apple's token settings or a stored refresh token.
    func revoke(of userId: String, logger: Logger) async {
        guard let tokens = client,
            let stored = try? await store.appleIdentity(userId: userId)?.refreshToken
        else { return }
        guard let refreshToken = storedSecrets.open(stored, purpose: StoredSecrets.appleRefreshToken) else {
            logger.warning("apple token not revoked at deletion", metadata: ["tally.user": .string(userId), "tally.reason": "sealed_under_unknown_key"])
            return
        }
        do {
            try await tokens.revoke(refreshToken: refreshToken, now: clock.now)
        } catch {
            logger.warning("apple token not revoked at deletion", metadata: ["tally.user": .string(userId), "tally.reason": .string(error.code.rawValue)])
        }
    }
}
