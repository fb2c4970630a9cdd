import Foundation
import TallyAPI
import TallyClient

/// The samples of `Client.signInWithApple`'s doc comment, verbatim, compiled (``SamplesAreCompiledTests`` checks they match).
enum AppleSignInDocSamples {
    /// The app's question to the user (a sample stand-in).
    static func askToBringProgress(_ guest: GuestProgress?) -> Bool { guest != nil }

    /// `Client.signInWithApple`: sign in, and merge the guest when the user agrees (or sign in without it).
    static func signIn(tally: Client, identityToken: String) async throws {
        let nonce = AppleSignInNonce()                  // request.nonce = nonce.hashed
        do {
            try await tally.signInWithApple(identityToken: identityToken, nonce: nonce)
        } catch let error as ClientError where error.code == .accountExists {
            // "This account exists — bring your guest progress?" Either answer goes with the same token.
            try await tally.signInWithApple(identityToken: identityToken, nonce: nonce, merge: askToBringProgress(error.guest))
        }
    }

    /// `Client.signIn(email:password:merge:)`: sign in to the account, bringing the guest's progress.
    static func signInMerging(tally: Client) async throws {
        let result = try await tally.signIn(email: "ada@example.com", password: "correct horse battery", merge: true)
        print("brought \(result.merged?.tokensMoved ?? 0) tokens")
    }
}
