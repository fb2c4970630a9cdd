import Foundation

/// Who a verified identity token says signed in: Apple's stable user id for the team (``sub``), and the contact
/// address the user chose to share, if any. Store ``sub`` as the identity; the email is a contact only (it may be a
/// private relay address, it may change, and Apple sends it only while the user shares it).
public struct AppleIdentity: Hashable, Sendable {
    /// Apple's user id (`sub`): stable for the user across the apps of one team. The account's key.
    public var sub: String
    /// The email (`email`), if the token has one: a contact, never an identity.
    public var email: String?
    /// Whether Apple verified the email (`email_verified`; Apple only sends verified ones).
    public var emailVerified: Bool
    /// Whether the email is a private relay address (`is_private_email`).
    public var isPrivateEmail: Bool
    /// The audience the token was issued for: the app's bundle id or Services ID, one of the configured ones.
    public var audience: String
    /// When Apple issued the token (`iat`).
    public var issuedAt: Date
    /// When the token stops being accepted (`exp`).
    public var expiresAt: Date
    /// The token's name: the SHA-256 hex of its signed part (header and payload as sent), the same for every copy of
    /// the token however its signature is spelt. A server that takes each token once remembers this until ``expiresAt``.
    public var tokenDigest: String

    /// An identity.
    public init(
        sub: String, email: String? = nil, emailVerified: Bool = false, isPrivateEmail: Bool = false, audience: String, issuedAt: Date,
        expiresAt: Date, tokenDigest: String
    ) {
        self.sub = sub
        self.email = email
        self.emailVerified = emailVerified
        self.isPrivateEmail = isPrivateEmail
        self.audience = audience
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.tokenDigest = tokenDigest
    }
}

/// A verified Sign in with Apple server-to-server notification (`POST {"payload": "<JWT>"}` to the app's endpoint):
/// one event about one user.
public struct AppleAccountEvent: Hashable, Sendable {
    /// What happened. An open set: a type Apple adds later keeps its raw string.
    public struct EventType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The type as Apple writes it.
        public let rawValue: String
        /// Wraps a type, known or not.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The raw string.
        public var description: String { rawValue }

        /// The user stopped forwarding email to the private relay address.
        public static let emailDisabled = Self(rawValue: "email-disabled")
        /// The user forwards email to the private relay address again.
        public static let emailEnabled = Self(rawValue: "email-enabled")
        /// The user stopped using Sign in with Apple with the app (sign them out everywhere).
        public static let consentRevoked = Self(rawValue: "consent-revoked")
        /// The user deleted their Apple account (delete the app's account of `sub`).
        public static let accountDelete = Self(rawValue: "account-delete")
    }

    /// What happened.
    public var type: EventType
    /// The user it is about (Apple's `sub`, as in ``AppleIdentity/sub``).
    public var sub: String
    /// When it happened (`event_time`).
    public var eventTime: Date
    /// The email it concerns (email events), if sent.
    public var email: String?
    /// Whether that email is a private relay address, if said.
    public var isPrivateEmail: Bool?
    /// The notification's id (`jti`): the same notification delivered twice has the same one.
    public var id: String
    /// When Apple signed the notification (`iat`).
    public var issuedAt: Date
    /// The audience (the app's client id) it was sent for.
    public var audience: String

    /// An event.
    public init(
        type: EventType, sub: String, eventTime: Date, email: String? = nil, isPrivateEmail: Bool? = nil, id: String, issuedAt: Date,
        audience: String
    ) {
        self.type = type
        self.sub = sub
        self.eventTime = eventTime
        self.email = email
        self.isPrivateEmail = isPrivateEmail
        self.id = id
        self.issuedAt = issuedAt
        self.audience = audience
    }
}
