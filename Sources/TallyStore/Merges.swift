import Foundation

// Merging a guest into an existing account (a guest signs in to an account it does not become in place): what the
// stores take and answer. The rules are ``MergePlanner``'s; each store reads a ``MergeSnapshot`` under its locks and
// writes the ``MergePlan``.

/// A guest's document kept beside the account's document of the same collection and id, under a new id.
public struct MergeConflict: Sendable, Hashable, Codable {
    /// The collection.
    public var collection: String
    /// The document's id in the guest's collection (the account's document keeps it).
    public var guestDocumentId: String
    /// The id the guest's document has in the account's collection.
    public var newId: String

    /// Creates a conflict.
    public init(collection: String, guestDocumentId: String, newId: String) {
        self.collection = collection
        self.guestDocumentId = guestDocumentId
        self.newId = newId
    }
}

/// What a merge carried from the guest into the account: stored with the merge, so that a retry answers the same.
public struct GuestMergeSummary: Sendable, Hashable, Codable {
    /// The guest merged.
    public var guestId: String
    /// The account it was merged into.
    public var accountId: String
    /// The guest's balance, moved by the `merge_out`/`merge_in` pair: negative when the account took over the guest's
    /// debt (a refund that took back tokens the guest had spent).
    public var tokensMoved: Int64
    /// The guest's expired open holds released first (nothing they held was charged).
    public var holdsReleased: Int
    /// The guest's live holds that became the account's (the calls that opened them settle on the account).
    public var holdsMoved: Int
    /// What was left of the guest's sign-up grant, which stays with it (``MergePlanner``).
    public var signupGrantLeft: Int64
    /// The guest's live documents now in the account's collections (conflicts included).
    public var documentsMoved: Int
    /// The guest's documents kept beside the account's of the same collection and id, under new ids.
    public var conflicts: [MergeConflict]
    /// The guest's App Store transactions now the account's (consumables credited to it, refunded ones it was to be
    /// credited for, its subscriptions' transactions).
    public var purchasesMoved: Int
    /// The subscriptions the guest held, now the account's (its bought premium recomputed).
    public var subscriptionsMoved: Int
    /// Free uses of today's windows the account took from the guest: for each quota, the guest's count above the
    /// account's (the account keeps the larger of the two, never the sum).
    public var quotaUsesTaken: Int
    /// The guest's sessions, revoked (to announce, as a sign-out's).
    public var revokedSessions: [String]
    /// The account's document change counter after the merge, when documents moved (the version to announce).
    public var documentsVersion: Int64?
    /// When the merge happened.
    public var mergedAt: Date

    /// Creates a summary.
    public init(
        guestId: String, accountId: String, tokensMoved: Int64, holdsReleased: Int, holdsMoved: Int = 0, signupGrantLeft: Int64 = 0,
        documentsMoved: Int, conflicts: [MergeConflict],
        purchasesMoved: Int, subscriptionsMoved: Int, quotaUsesTaken: Int, revokedSessions: [String], documentsVersion: Int64?,
        mergedAt: Date
    ) {
        self.guestId = guestId
        self.accountId = accountId
        self.tokensMoved = tokensMoved
        self.holdsReleased = holdsReleased
        self.holdsMoved = holdsMoved
        self.signupGrantLeft = signupGrantLeft
        self.documentsMoved = documentsMoved
        self.conflicts = conflicts
        self.purchasesMoved = purchasesMoved
        self.subscriptionsMoved = subscriptionsMoved
        self.quotaUsesTaken = quotaUsesTaken
        self.revokedSessions = revokedSessions
        self.documentsVersion = documentsVersion
        self.mergedAt = mergedAt
    }

    private enum CodingKeys: String, CodingKey {
        case guestId, accountId, tokensMoved, holdsReleased, holdsMoved, signupGrantLeft, documentsMoved, conflicts, purchasesMoved
        case subscriptionsMoved, quotaUsesTaken, revokedSessions, documentsVersion, mergedAt
    }

    /// Decodes a stored summary; one stored before holds moved and grants stayed has 0 for both.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            guestId: try c.decode(String.self, forKey: .guestId), accountId: try c.decode(String.self, forKey: .accountId),
            tokensMoved: try c.decode(Int64.self, forKey: .tokensMoved), holdsReleased: try c.decode(Int.self, forKey: .holdsReleased),
            holdsMoved: try c.decodeIfPresent(Int.self, forKey: .holdsMoved) ?? 0,
            signupGrantLeft: try c.decodeIfPresent(Int64.self, forKey: .signupGrantLeft) ?? 0,
            documentsMoved: try c.decode(Int.self, forKey: .documentsMoved), conflicts: try c.decode([MergeConflict].self, forKey: .conflicts),
            purchasesMoved: try c.decode(Int.self, forKey: .purchasesMoved), subscriptionsMoved: try c.decode(Int.self, forKey: .subscriptionsMoved),
            quotaUsesTaken: try c.decode(Int.self, forKey: .quotaUsesTaken), revokedSessions: try c.decode([String].self, forKey: .revokedSessions),
            documentsVersion: try c.decodeIfPresent(Int64.self, forKey: .documentsVersion), mergedAt: try c.decode(Date.self, forKey: .mergedAt))
    }

    /// The text both stores keep for the merge (JSON, instants in milliseconds, keys sorted).
    public func encoded() throws -> String {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }

    /// The summary ``encoded()`` wrote.
    public init(encoded text: String) throws {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        self = try decoder.decode(Self.self, from: Data(text.utf8))
    }
}

/// What ``MergeStore/merge(guestId:into:now:)`` answered.
public struct MergeOutcome: Sendable, Hashable {
    /// What the merge carried (for a replay: as the first merge stored it).
    public var summary: GuestMergeSummary
    /// Whether the guest had been merged into the account before: nothing changed now.
    public var replayed: Bool

    /// Creates an outcome.
    public init(summary: GuestMergeSummary, replayed: Bool) {
        self.summary = summary
        self.replayed = replayed
    }
}

/// What a merge would carry now, read without writing (the `account_exists` answer).
public struct MergePreview: Sendable, Hashable {
    /// The summary the merge would store (its `revokedSessions`: the guest's live sessions; for a guest merged into the
    /// account already, the stored summary).
    public var summary: GuestMergeSummary
    /// The guest was merged into the account already.
    public var replayed: Bool
    /// `.guestInDebt` when the merge would be refused because the account cannot pay the guest's debt; `nil` otherwise.
    public var refusal: StoreError.Code?

    /// Creates a preview.
    public init(summary: GuestMergeSummary, replayed: Bool, refusal: StoreError.Code? = nil) {
        self.summary = summary
        self.replayed = replayed
        self.refusal = refusal
    }
}

/// Merging a guest into an existing account: everything the guest had moves into the account, exactly once, in one
/// transaction that locks both accounts (their sync states, then their wallets, in id order: the order document
/// writes, commands and purchases take them), planned by ``MergePlanner``. Afterwards the guest has no way in (its
/// sessions revoked, its installation detached) and says where it went (``UserRecord/mergedInto``): commands and
/// document writes on it are refused `.userNotFound`, and a purchase naming it (`appAccountToken`) lands on the account.
public protocol MergeStore: Sendable {
    /// Merges the guest into the account (see ``MergePlanner`` for what moves and how). Merging the same guest into the
    /// same account again returns the stored summary (``MergeOutcome/replayed``) and changes nothing. Throws
    /// `.userNotFound` (either account does not exist), `.alreadyMerged` (the guest went into another account),
    /// `.mergeRefused` (the guest is not a guest, the account is one, or they are the same) and `.guestInDebt`.
    func merge(guestId: String, into accountId: String, now: Date) async throws -> MergeOutcome

    /// What ``merge(guestId:into:now:)`` would do now, without writing or locking: the same summary (the guest's
    /// balance, documents and purchases), or the stored one when the guest was merged into the account already. Throws
    /// what the merge would, except `.guestInDebt`, which ``MergePreview/refusal`` carries.
    func mergePreview(guestId: String, into accountId: String, now: Date) async throws -> MergePreview
}
