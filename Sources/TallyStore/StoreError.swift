import Foundation

/// Every failure a store reports. Refusals that leave the books unchanged carry what the
/// client needs (the account state on 402, the wait on 429).
///
/// The code wraps a private enum so new cases never break callers; `description` is
/// redacted and never contains ids, emails or tokens.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Base: String, Sendable {
            case userNotFound, holdNotFound, holdNotOpen, insufficientTokens, quotaExhausted
            case credentialInUse, alreadyLinked, invalidRefreshToken, refreshTokenReused
            case rateLimited, idempotencyMismatch, idempotencyKeyInUse, invalidInput, unavailable
            case versionConflict, documentNotFound, documentTooLarge, collectionFull, invalidDocument
            case clientIdInUse, resyncRequired, storageFull, purchaseClaimed, signInRequired, sandboxLimit
            case appleIdentityInUse, mergeRefused, alreadyMerged, guestInDebt
        }
        fileprivate let base: Base
        /// The code's name.
        public var description: String { base.rawValue }

        /// The account does not exist.
        public static let userNotFound = Code(base: .userNotFound)
        /// No such hold for this account.
        public static let holdNotFound = Code(base: .holdNotFound)
        /// The hold was already captured, released or expired.
        public static let holdNotOpen = Code(base: .holdNotOpen)
        /// Too few tokens available.
        public static let insufficientTokens = Code(base: .insufficientTokens)
        /// No free use left of a quota-only action.
        public static let quotaExhausted = Code(base: .quotaExhausted)
        /// The email belongs to another account.
        public static let credentialInUse = Code(base: .credentialInUse)
        /// The account already has an email.
        public static let alreadyLinked = Code(base: .alreadyLinked)
        /// Unknown, expired or revoked refresh token.
        public static let invalidRefreshToken = Code(base: .invalidRefreshToken)
        /// A rotated refresh token was presented again; the family is revoked.
        public static let refreshTokenReused = Code(base: .refreshTokenReused)
        /// Too many guest sign-ups from one address.
        public static let rateLimited = Code(base: .rateLimited)
        /// The idempotency key was used with another request.
        public static let idempotencyMismatch = Code(base: .idempotencyMismatch)
        /// The idempotency key is being processed by another request.
        public static let idempotencyKeyInUse = Code(base: .idempotencyKeyInUse)
        /// The store refused a value (a schema constraint).
        public static let invalidInput = Code(base: .invalidInput)
        /// The database could not be reached.
        public static let unavailable = Code(base: .unavailable)
        /// A document precondition (`If-Match`, `If-None-Match: *`, `ifVersion`) failed; see ``StoreError/current``.
        public static let versionConflict = Code(base: .versionConflict)
        /// No such live document (a patch or delete of an absent or deleted one).
        public static let documentNotFound = Code(base: .documentNotFound)
        /// The document's data is over the collection's `maxDocumentBytes`.
        public static let documentTooLarge = Code(base: .documentTooLarge)
        /// The user has the collection's `maxDocuments` live documents.
        public static let collectionFull = Code(base: .collectionFull)
        /// The data is not an object, or lacks the collection's range key as a string.
        public static let invalidDocument = Code(base: .invalidDocument)
        /// The sync client id belongs to another user.
        public static let clientIdInUse = Code(base: .clientIdInUse)
        /// The pull cursor is older than the tombstones kept (or not one of this user's): pull without one.
        public static let resyncRequired = Code(base: .resyncRequired)
        /// The write would take the user past their ``SyncBudget`` (documents and tombstones, bytes, client ids).
        public static let storageFull = Code(base: .storageFull)
        /// The App Store transaction is another account's: a consumable credited to it (or to the account its
        /// `appAccountToken` names, which the call credited if no one had been), or a subscription whose
        /// `appAccountToken` names another existing account.
        public static let purchaseClaimed = Code(base: .purchaseClaimed)
        /// A guest submitted a subscription whose `appAccountToken` names another account, one that can be signed in to:
        /// it stays with that account, which the user signs in to.
        public static let signInRequired = Code(base: .signInRequired)
        /// A Sandbox consumable would take the account's Sandbox credits past the transaction's
        /// ``VerifiedTransaction/sandboxLimit``: nothing was credited.
        public static let sandboxLimit = Code(base: .sandboxLimit)
        /// The Apple identity (its `sub`) is linked to another account.
        public static let appleIdentityInUse = Code(base: .appleIdentityInUse)
        /// A merge that cannot be: the source is not a guest (it has an email or an Apple identity), the target is a guest
        /// or a merged guest, or both are the same account.
        public static let mergeRefused = Code(base: .mergeRefused)
        /// The guest was merged into another account already (merging it into the same one again replays the merge).
        public static let alreadyMerged = Code(base: .alreadyMerged)
        /// The guest owes tokens (a refund took back tokens it had spent) that the account's available tokens cannot pay:
        /// the merge is refused, as the account could otherwise go below zero without a refund of its own.
        public static let guestInDebt = Code(base: .guestInDebt)
    }

    /// The kind of failure.
    public var code: Code
    /// The account state at the refusal, for `insufficientTokens` and `quotaExhausted`.
    public var state: AccountState?
    /// How long to wait, for `rateLimited`.
    public var retryAfter: TimeInterval?
    /// The document as it is, for `versionConflict` (`nil`: absent or deleted).
    public var current: DocumentRecord?
    /// Underlying error, for logs only.
    public var underlying: (any Error)?

    /// Creates an error.
    public init(
        _ code: Code, state: AccountState? = nil, retryAfter: TimeInterval? = nil, current: DocumentRecord? = nil,
        underlying: (any Error)? = nil
    ) {
        self.code = code
        self.state = state
        self.retryAfter = retryAfter
        self.current = current
        self.underlying = underlying
    }

    /// The code only: safe for logs and clients.
    public var description: String { "StoreError(\(code))" }
}
