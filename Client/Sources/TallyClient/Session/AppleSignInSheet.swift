import Foundation
import TallyAPI

/// One run of Sign in with Apple's sheet, from its request to the signed-in user: it makes the nonce (its SHA-256 goes
/// in Apple's request, the raw one to the server), reads the credential the sheet answers, and signs in with it —
/// asking `merge` when a guest's Apple ID turns out to be an existing account, and sending the answer with the same
/// identity token (no second sheet). Make one per sheet shown.
///
/// On Apple platforms, ``Client/signInWithApple(presentationAnchor:merge:)`` runs the whole flow in one call; with
/// SwiftUI's `SignInWithAppleButton`, hand its request to ``prepare(_:)`` and its result to
/// ``complete(_:client:merge:)``. What is decided here (the nonce, the credential's text, cancellation, the merge
/// question) is the same code on Linux, where it is tested against the server and a Sign in with Apple stand-in.
public struct AppleSignInSheet: Sendable {
    /// The nonce of this sheet's request.
    public let nonce: AppleSignInNonce

    /// A sheet with a new random nonce.
    public init() { nonce = AppleSignInNonce() }

    /// A sheet whose request carries `nonce`'s hash.
    public init(nonce: AppleSignInNonce) { self.nonce = nonce }

    /// What `ASAuthorizationAppleIDRequest.nonce` must be set to: the SHA-256 of the raw nonce, in hex.
    public var requestNonce: String { nonce.hashed }

    /// Signs in with the credential the sheet answered (`ASAuthorizationAppleIDCredential`'s `identityToken` and
    /// `authorizationCode`, as Apple hands them: UTF-8 bytes). When a signed-in guest's Apple ID already has an account,
    /// `merge` is asked with what the guest would bring; its answer goes with the same identity token: true carries the
    /// guest into the account, false signs in to the account and leaves the guest as it was.
    ///
    /// - Throws: ``ClientError/Code/invalidResponse`` when the credential has no identity token; what
    ///   ``Client/signInWithApple(identityToken:nonce:authorizationCode:merge:)`` throws.
    @discardableResult
    public func signIn(
        _ client: Client, identityToken: Data?, authorizationCode: Data?,
        merge: @Sendable (GuestProgress?) async -> Bool
    ) async throws -> SignInResult {
        let (token, code) = try Self.credentialText(identityToken: identityToken, authorizationCode: authorizationCode)
        do {
            return try await client.signInWithApple(identityToken: token, nonce: nonce, authorizationCode: code)
        } catch let error as ClientError where error.code == .accountExists {
            let answer = await merge(error.guest)
            return try await client.signInWithApple(identityToken: token, nonce: nonce, authorizationCode: code, merge: answer)
        }
    }

    /// What the sheet answered, reduced to what signing in needs (Sendable: Apple's authorization object is not, and
    /// the sheet answers on the main actor).
    enum Outcome: Sendable {
        /// An Apple ID credential's identity token and authorization code, as Apple hands them.
        case credential(identityToken: Data?, authorizationCode: Data?)
        /// Another kind of credential than an Apple ID's.
        case otherCredential
        /// The sheet failed, or was closed.
        case failure(any Error)
    }

    /// Signs in with what the sheet answered; nil when the user closed it.
    func finish(_ outcome: Outcome, client: Client, merge: @Sendable (GuestProgress?) async -> Bool) async throws -> SignInResult? {
        switch outcome {
        case .failure(let error):
            if Self.isCancellation(error) { return nil }
            throw error
        case .otherCredential:
            throw ClientError(.invalidResponse, message: "Sign in with Apple answered with another kind of credential")
        case .credential(let identityToken, let authorizationCode):
            return try await signIn(client, identityToken: identityToken, authorizationCode: authorizationCode, merge: merge)
        }
    }

    /// The credential's identity token and authorization code as text. Pure.
    static func credentialText(identityToken: Data?, authorizationCode: Data?) throws -> (token: String, code: String?) {
        guard let identityToken, !identityToken.isEmpty, let token = String(data: identityToken, encoding: .utf8) else {
            throw ClientError(.invalidResponse, message: "Sign in with Apple answered without an identity token")
        }
        let code = authorizationCode.flatMap { $0.isEmpty ? nil : String(data: $0, encoding: .utf8) }
        return (token, code)
    }

    /// Whether `error`, the sheet's failure, is the user closing it (`ASAuthorizationError.canceled`): not an error
    /// to show. Pure.
    public static func isCancellation(_ error: any Error) -> Bool {
        let error = error as NSError
        return error.domain == Self.authorizationErrorDomain && error.code == Self.canceledCode
    }

    /// `ASAuthorizationErrorDomain`.
    static let authorizationErrorDomain = "com.apple.AuthenticationServices.AuthorizationError"
    /// `ASAuthorizationError.Code.canceled`.
    static let canceledCode = 1001
}

#if canImport(AuthenticationServices)
import AuthenticationServices

// Apple platforms only, and kept thin: the sheet's request and answer, over the logic above. What a device must still
// confirm: the sheet shows from the anchor, a cancel comes back as `canceled`, and a real identity token signs in.
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
extension AppleSignInSheet {
    /// Prepares `request` (SwiftUI's `SignInWithAppleButton` `onRequest`): the email asked for, the nonce's hash set.
    public func prepare(_ request: ASAuthorizationAppleIDRequest) {
        request.requestedScopes = [.email]
        request.nonce = requestNonce
    }

    /// Signs in with the sheet's `result` (SwiftUI's `SignInWithAppleButton` `onCompletion`); nil when the user
    /// closed the sheet. `merge` is asked as ``signIn(_:identityToken:authorizationCode:merge:)`` says.
    @MainActor
    @discardableResult
    public func complete(
        _ result: Result<ASAuthorization, any Error>, client: Client, merge: @Sendable (GuestProgress?) async -> Bool
    ) async throws -> SignInResult? {
        try await finish(Self.outcome(result), client: client, merge: merge)
    }

    /// The Sendable part of the sheet's `result`, read on the main actor.
    @MainActor
    static func outcome(_ result: Result<ASAuthorization, any Error>) -> Outcome {
        switch result {
        case .failure(let error): return .failure(error)
        case .success(let authorization):
            guard let credential = authorization.credential as? ASAuthorizationAppleIDCredential else { return .otherCredential }
            return .credential(identityToken: credential.identityToken, authorizationCode: credential.authorizationCode)
        }
    }
}

#if !os(watchOS)
@available(iOS 13.0, macOS 10.15, tvOS 13.0, *)
extension Client {
    /// Shows Sign in with Apple's sheet from `anchor` (the window it appears over) and signs in with its answer: a new
    /// nonce, the email asked for, the identity token and authorization code sent to the server. When a signed-in
    /// guest's Apple ID already has an account, `merge` is asked with what the guest would bring; its answer goes with
    /// the same identity token (true: the guest is carried into the account; false: the account signs in and the guest
    /// stays as it was). Returns nil when the user closed the sheet.
    @MainActor
    @discardableResult
    public func signInWithApple(
        presentationAnchor anchor: ASPresentationAnchor, merge: @Sendable (GuestProgress?) async -> Bool
    ) async throws -> SignInResult? {
        let sheet = AppleSignInSheet()
        let request = ASAuthorizationAppleIDProvider().createRequest()
        sheet.prepare(request)
        let answer = AppleSignInSheetAnswer(anchor: anchor)
        let controller = ASAuthorizationController(authorizationRequests: [request])
        controller.delegate = answer
        controller.presentationContextProvider = answer
        let outcome = await answer.wait { controller.performRequests() }
        return try await sheet.finish(outcome, client: self, merge: merge)
    }
}

/// The sheet's delegate and anchor: hands the one answer to the waiting call. Held by that call while the sheet shows
/// (the controller keeps only weak references).
@available(iOS 13.0, macOS 10.15, tvOS 13.0, *)
@MainActor
private final class AppleSignInSheetAnswer: NSObject {
    private let anchor: ASPresentationAnchor
    private var continuation: CheckedContinuation<AppleSignInSheet.Outcome, Never>?

    init(anchor: ASPresentationAnchor) { self.anchor = anchor }

    /// Runs `start`, then waits for the sheet's answer.
    func wait(_ start: () -> Void) async -> AppleSignInSheet.Outcome {
        await withCheckedContinuation { continuation in
            self.continuation = continuation
            start()
        }
    }

    fileprivate func answered(_ result: Result<ASAuthorization, any Error>) {
        continuation?.resume(returning: AppleSignInSheet.outcome(result))
        continuation = nil
    }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, *)
extension AppleSignInSheetAnswer: @preconcurrency ASAuthorizationControllerDelegate {
    func authorizationController(controller: ASAuthorizationController, didCompleteWithAuthorization authorization: ASAuthorization) {
        answered(.success(authorization))
    }

    func authorizationController(controller: ASAuthorizationController, didCompleteWithError error: any Error) {
        answered(.failure(error))
    }
}

@available(iOS 13.0, macOS 10.15, tvOS 13.0, *)
extension AppleSignInSheetAnswer: @preconcurrency ASAuthorizationControllerPresentationContextProviding {
    func presentationAnchor(for controller: ASAuthorizationController) -> ASPresentationAnchor { anchor }
}
#endif
#endif
