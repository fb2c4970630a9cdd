import Foundation
import TallyClient

/// The samples of the account calls' doc comments (`Client+Account.swift`) and of README's "Account recovery", verbatim,
/// compiled (``SamplesAreCompiledTests`` checks they match).
enum AccountDocSamples {
    /// `Client.requestPasswordReset(email:)`: a code mailed, then typed in.
    static func reset(tally: Client, email: String, code: String, newPassword: String) async throws {
        try await tally.requestPasswordReset(email: email)
        // … the user types the code from the mail:
        try await tally.resetPassword(email: email, code: code, newPassword: newPassword)
    }

    static func showVerified(_ verified: Bool) {}
    static func showCodeError() {}

    /// README.md: verifying the email, and a code that does not work.
    static func verify(tally: Client, code: String) async throws {
        try await tally.requestEmailVerification()
        do {
            let me = try await tally.verifyEmail(code: code)
            showVerified(me.emailVerified)                    // true; the cached profile (meQuery) shows it too
        } catch let error as ClientError where error.serverCode == .invalidCode {
            showCodeError()                                   // wrong, expired or used: ask for a new code
        }
    }

    /// `Client.deleteAccount()`: the deletion, and a subscription Apple still bills.
    static func delete(tally: Client) async throws -> String? {
        var notice: String?
        let deletion = try await tally.deleteAccount()
        if deletion.hadActiveSubscription {
            notice = "Your subscription renews until you cancel it in the App Store."
        }
        return notice
    }
}
