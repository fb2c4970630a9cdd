import Foundation

/// `POST /v1/auth/apple`: sign in (or up) with Sign in with Apple. Called with a guest's access token, a new Apple
/// account becomes that guest in place; an Apple account Tally already knows is signed in to — with `merge: true` the
/// guest's wallet, documents and purchases are carried into it, without it the answer is 409 `account_exists` with
/// what the guest would bring (``ErrorResponse/guest``).
public struct AppleSignInRequest: Codable, Hashable, Sendable {
    /// `ASAuthorizationAppleIDCredential.identityToken`, as text: the JWT Apple signed.
    public var identityToken: String
    /// The raw nonce the app generated; the request to Apple carried its SHA-256 (hex), which the token repeats.
    public var nonce: String
    /// `ASAuthorizationAppleIDCredential.authorizationCode`, as text: exchanged for the refresh token that account
    /// deletion revokes (App Store guideline 5.1.1(v)). Optional.
    public var authorizationCode: String?
    /// What to do when the calling guest's Apple ID turns out to be an existing account: `true` carries the guest's
    /// progress into it, `false` (the user declined) signs in to it and leaves the guest as it was; nil asks first
    /// (409 `account_exists`, answered with the same identity token).
    public var merge: Bool?

    /// Creates the request.
    public init(identityToken: String, nonce: String, authorizationCode: String? = nil, merge: Bool? = nil) {
        self.identityToken = identityToken
        self.nonce = nonce
        self.authorizationCode = authorizationCode
        self.merge = merge
    }
}

/// What a guest has that a merge would carry into an account: the 409 `account_exists` answer's `guest`.
public struct GuestProgress: Codable, Hashable, Sendable {
    /// The tokens the merge would move: the guest's balance (held tokens included: its live holds move with it) less
    /// what is left of its sign-up grant, which stays with the guest.
    public var balance: Int64
    /// Its synced documents, in all collections.
    public var documents: Int
    /// Its App Store purchases.
    public var purchases: Int

    /// Creates a summary.
    public init(balance: Int64, documents: Int, purchases: Int) {
        self.balance = balance
        self.documents = documents
        self.purchases = purchases
    }
}

/// A guest's document whose id the account already used: kept beside the account's under a new id.
public struct MergedDocumentConflict: Codable, Hashable, Sendable {
    /// The collection.
    public var collection: String
    /// The id the guest's document had (the account's document keeps it).
    public var documentId: String
    /// The id the guest's document has now.
    public var newId: String

    /// Creates a conflict.
    public init(collection: String, documentId: String, newId: String) {
        self.collection = collection
        self.documentId = documentId
        self.newId = newId
    }
}

/// What a merge carried from a guest into the account (the sign-in's `merged`); the same on a retry.
public struct MergeSummary: Codable, Hashable, Sendable {
    /// The guest's id, which now only records that it was merged.
    public var guestUserId: String
    /// Tokens moved (a `merge_out` entry on the guest, a `merge_in` on the account).
    public var tokensMoved: Int64
    /// Expired open holds of the guest released before the move.
    public var holdsReleased: Int
    /// Live holds of the guest that became the account's: an AI answer that was streaming is charged to the account.
    public var holdsMoved: Int
    /// Tokens of the guest's sign-up grant it had not spent, which stay with the guest: a sign-up grant does not travel
    /// with a merge (bought, granted and earned tokens do).
    public var signupGrantLeft: Int64
    /// Documents moved into the account's collections, conflicts included.
    public var documentsMoved: Int
    /// Documents kept beside the account's under a new id.
    public var conflicts: [MergedDocumentConflict]
    /// App Store purchases moved to the account.
    public var purchasesMoved: Int

    /// Creates a summary.
    public init(
        guestUserId: String, tokensMoved: Int64, holdsReleased: Int, holdsMoved: Int = 0, signupGrantLeft: Int64 = 0, documentsMoved: Int,
        conflicts: [MergedDocumentConflict], purchasesMoved: Int
    ) {
        self.guestUserId = guestUserId
        self.tokensMoved = tokensMoved
        self.holdsReleased = holdsReleased
        self.holdsMoved = holdsMoved
        self.signupGrantLeft = signupGrantLeft
        self.documentsMoved = documentsMoved
        self.conflicts = conflicts
        self.purchasesMoved = purchasesMoved
    }

    private enum CodingKeys: String, CodingKey {
        case guestUserId, tokensMoved, holdsReleased, holdsMoved, signupGrantLeft, documentsMoved, conflicts, purchasesMoved
    }

    /// Decodes a summary; from a server that does not send `holdsMoved` or `signupGrantLeft`, 0.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            guestUserId: try c.decode(String.self, forKey: .guestUserId), tokensMoved: try c.decode(Int64.self, forKey: .tokensMoved),
            holdsReleased: try c.decode(Int.self, forKey: .holdsReleased), holdsMoved: try c.decodeIfPresent(Int.self, forKey: .holdsMoved) ?? 0,
            signupGrantLeft: try c.decodeIfPresent(Int64.self, forKey: .signupGrantLeft) ?? 0,
            documentsMoved: try c.decode(Int.self, forKey: .documentsMoved), conflicts: try c.decode([MergedDocumentConflict].self, forKey: .conflicts),
            purchasesMoved: try c.decode(Int.self, forKey: .purchasesMoved))
    }
}

/// `POST /v1/webhooks/apple-id`: a Sign in with Apple server-to-server notification, as Apple sends it.
public struct AppleIDNotificationRequest: Codable, Hashable, Sendable {
    /// The notification: a JWT signed with Apple's keys, its `events` claim the event.
    public var payload: String

    /// Creates the request.
    public init(payload: String) { self.payload = payload }
}
