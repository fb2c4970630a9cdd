import Foundation
import TallyAPI

/// The nonce of one Sign in with Apple request: put ``hashed`` in `ASAuthorizationAppleIDRequest.nonce` and hand
/// ``raw`` to ``Client/signInWithApple(identityToken:nonce:authorizationCode:merge:)``. The server checks that Apple's
/// identity token carries the hash of the raw nonce it is sent, so a token taken from another request is refused.
/// Make a new one for every request.
public struct AppleSignInNonce: Sendable, Hashable {
    /// The raw nonce: 32 random bytes, base64url without padding.
    public let raw: String

    /// A new random nonce.
    public init() {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        raw = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// A nonce made elsewhere.
    public init(raw: String) { self.raw = raw }

    /// The SHA-256 of ``raw``, as 64 lower-case hexadecimal digits: what Apple's request carries.
    public var hashed: String { SHA256.hex(Array(raw.utf8)) }
}

/// What a sign-in did: the user now signed in and, when a guest was merged into it, what moved.
public struct SignInResult: Sendable, Hashable {
    /// The signed-in user.
    public var user: SessionUser
    /// What the calling guest brought into the account (`merge: true`), else nil.
    public var merged: MergeSummary?
}

extension Client {
    /// Signs in with Sign in with Apple: `identityToken` and `authorizationCode` are the credential's
    /// (`ASAuthorizationAppleIDCredential`, as text), `nonce` the one whose ``AppleSignInNonce/hashed`` the request to
    /// Apple carried. Signed in as a guest, a new Apple ID becomes this guest's account in place (same wallet and
    /// history); an Apple ID that already has an account throws ``ClientError/Code/accountExists`` with
    /// ``ClientError/guest`` — what the guest would bring — when `merge` is nil. Ask the user, then call again with the
    /// same identity token (no second sheet): `merge: true` carries the guest's tokens, documents and purchases into the
    /// account and signs in to it; `merge: false` signs in to the account and leaves the guest as it was, on the server
    /// and on this installation (signing out and in as a guest later finds it again). The cached values of the previous
    /// user are cleared, as at any change of user.
    ///
    /// ```swift
    /// let nonce = AppleSignInNonce()                  // request.nonce = nonce.hashed
    /// do {
    ///     try await tally.signInWithApple(identityToken: identityToken, nonce: nonce)
    /// } catch let error as ClientError where error.code == .accountExists {
    ///     // "This account exists — bring your guest progress?" Either answer goes with the same token.
    ///     try await tally.signInWithApple(identityToken: identityToken, nonce: nonce, merge: askToBringProgress(error.guest))
    /// }
    /// ```
    ///
    /// - Throws: ``ClientError/Code/pendingWrites`` with `merge: false` when the guest's synced changes could not be
    ///   pushed first (they would be lost with its document file; nothing was sent, the token is still good).
    @discardableResult
    public func signInWithApple(
        identityToken: String, nonce: AppleSignInNonce, authorizationCode: String? = nil, merge: Bool? = nil
    ) async throws -> SignInResult {
        if merge == false, syncStatus.pendingMutations > 0 {
            // Declined: the guest stays, but its document file goes with the switch; its changes go to the server first.
            try? await sync.now()
            let pending = syncStatus.pendingMutations
            if pending > 0 {
                throw ClientError(
                    .pendingWrites, message: "\(pending) changes of the guest are not synced yet: sync first, then sign in", pendingWrites: pending)
            }
        }
        let request = AppleSignInRequest(identityToken: identityToken, nonce: nonce.raw, authorizationCode: authorizationCode, merge: merge)
        return try await signInCarryingGuest { try await self.session.signInWithApple(request, beforeSwitch: $0) }
    }

    /// Signs in to a linked account and, signed in as a guest, carries the guest into it first: its tokens (open holds
    /// released), documents — unpushed changes included — and purchases, as ``signInWithApple(identityToken:nonce:authorizationCode:merge:)``
    /// does with `merge: true`. ``SignInResult/merged`` says what moved (nil when no guest was signed in). A wrong email
    /// or password throws ``ClientError/Code/invalidCredentials`` and changes nothing.
    ///
    /// ```swift
    /// let result = try await tally.signIn(email: "ada@example.com", password: "correct horse battery", merge: true)
    /// print("brought \(result.merged?.tokensMoved ?? 0) tokens")
    /// ```
    @discardableResult
    public func signIn(email: String, password: String, merge: Bool) async throws -> SignInResult {
        guard merge else { return SignInResult(user: try await signIn(email: email, password: password), merged: nil) }
        return try await signInCarryingGuest { try await self.session.signInMerging(email: email, password: password, beforeSwitch: $0) }
    }

    /// Runs a sign-in that may merge the signed-in guest: before the switch to the account, the guest's synced
    /// documents, unpushed changes included, go with it; then what follows every sign-in.
    private func signInCarryingGuest(
        _ send: (@escaping @Sendable (SessionTokens) -> Void) async throws -> SessionTokens
    ) async throws -> SignInResult {
        let guest = await self.user.flatMap { $0.isGuest ? $0.userId : nil }
        let tokens = try await send { tokens in
            if let guest, tokens.merged?.guestUserId == guest { self.syncHost.carryDocuments(from: guest, to: tokens.userId) }
        }
        let user = await signedIn(SessionUser(userId: tokens.userId, isGuest: tokens.isGuest))
        return SignInResult(user: user, merged: tokens.merged)
    }
}
