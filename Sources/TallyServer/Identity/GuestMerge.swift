import Foundation
import Hummingbird
import Logging
import TallyAPI
import TallyStore

/// What a sign-in does for a guest that turns out to have an account: finds the calling guest by the request's own
/// access token (never by an id in the body), merges it into the account when the app asked, and ends the guest's
/// sessions everywhere. Shared by `POST /v1/auth/apple` and `POST /v1/auth/sign-in`.
struct GuestMerge: Sendable {
    /// The guests, accounts and merges.
    let store: any TallyStorage
    /// Ends the merged guest's sessions.
    let sessions: SessionKeeper
    /// Tells the account's streams that its wallet and documents changed.
    let notifier: any ChangeNotifier
    /// Checks the caller's access token.
    let auth: AuthMiddleware
    /// Checks the assertion a merge of an attested guest needs.
    let integrity: DeviceIntegrity

    /// Who calls a sign-in route with `Authorization: Bearer`.
    struct Caller {
        /// The caller's user and session.
        let identity: Identity
        /// The caller is a guest already merged into an account, whose sessions ended with the merge: its token, still
        /// signed and unexpired, counts only for retrying that merge (`merge: true` into the same account), which answers
        /// the same summary again and moves nothing — so an app that lost the merge's answer can ask again.
        let merged: Bool
        /// The caller's user id.
        var userId: String { identity.userId }
    }

    /// The caller of a public route that may carry `Authorization: Bearer`: nil without the header, 401 for a token
    /// that is not valid (a stale token must not silently sign in somewhere else) unless it is a merged guest's.
    func caller(_ request: Request) async throws -> Caller? {
        guard let header = request.headers[.authorization] else { return nil }
        guard let token = AuthMiddleware.bearer(header) else { throw Self.invalidToken }
        if let identity = try await auth.identity(of: token) { return Caller(identity: identity, merged: false) }
        guard let verified = await sessions.tokens.verify(token), try await store.user(id: verified.identity.userId)?.mergedInto != nil else {
            throw Self.invalidToken
        }
        return Caller(identity: verified.identity, merged: true)
    }

    /// The answer to a token that is not valid.
    static var invalidToken: APIError { APIError(.unauthorized, "A valid access token is required.") }

    /// The 409 `account_exists` answer: what the guest would bring into `accountId`.
    func accountExists(guestId: String, accountId: String, now: Date) async throws -> APIError {
        let preview = try await storeCall { try await store.mergePreview(guestId: guestId, into: accountId, now: now) }
        var error = APIError(
            .accountExists, "This sign-in belongs to an existing account; sign in again with merge: true to bring the guest's progress into it.")
        let summary = preview.summary
        error.body.guest = GuestProgress(balance: summary.tokensMoved, documents: summary.documentsMoved, purchases: summary.purchasesMoved)
        return error
    }

    /// Where App Attest is enforced, merging a guest that has an attested key needs an assertion by that key over the
    /// sign-in (`403 attestation_required`): its free value goes with it only from its own device.
    func checkAttested(_ request: Request, guestId: String, body: ByteBuffer, logger: Logger) async throws {
        guard integrity.checksAssertions, try await store.hasAttestedKey(userId: guestId) else { return }
        guard try await integrity.allowsFreeValue(request, userId: guestId, body: body, logger: logger) else {
            throw APIError(.attestationRequired, "Merging this guest needs an X-Tally-Assertion from its attested device.")
        }
    }

    /// Merges the guest into the account (idempotent: a retry answers the same summary), ends the guest's sessions on
    /// every process and tells the account's streams that its wallet and documents changed.
    func merge(guestId: String, into accountId: String, now: Date, logger: Logger) async throws -> MergeSummary {
        let outcome = try await storeCall { try await store.merge(guestId: guestId, into: accountId, now: now) }
        let summary = outcome.summary
        if !outcome.replayed {
            sessions.end(sessionIds: summary.revokedSessions, of: guestId)
            notifier.walletChanged(userId: accountId)
            if let version = summary.documentsVersion { notifier.documentsChanged(userId: accountId, version: version) }
            logger.info(
                "guest merged",
                metadata: [
                    "tally.user": .string(accountId), "tally.guest": .string(guestId), "tally.tokens_moved": "\(summary.tokensMoved)",
                    "tally.documents_moved": "\(summary.documentsMoved)",
                ])
        }
        return MergeSummary(
            guestUserId: guestId, tokensMoved: summary.tokensMoved, holdsReleased: summary.holdsReleased,
            holdsMoved: summary.holdsMoved, signupGrantLeft: summary.signupGrantLeft, documentsMoved: summary.documentsMoved,
            conflicts: summary.conflicts.map { MergedDocumentConflict(collection: $0.collection, documentId: $0.guestDocumentId, newId: $0.newId) },
            purchasesMoved: summary.purchasesMoved)
    }

    /// The store's refusals of a merge as answers; other store errors as usual.
    private func storeCall<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as StoreError {
            switch error.code {
            case .alreadyMerged: throw APIError(.alreadyMerged, "This guest was merged into another account already.")
            case .guestInDebt: throw APIError(.guestInDebt, "The guest owes tokens from a refund that the account cannot pay; nothing was merged.")
            case .mergeRefused: throw APIError(.mergeRefused, "Only a guest can be merged, into another account that is not a guest.")
            default: throw error
            }
        }
    }
}
