import Foundation

/// `POST /v1/auth/guest`: sign in (or up) by an installation secret.
public struct GuestSignInRequest: Codable, Hashable, Sendable {
    /// A random secret the app generated once and keeps in secure storage (16–128 characters).
    public var deviceId: String
    /// An App Attest attestation of the installation's key, for servers that verify App Attest (others ignore it):
    /// an invalid one is refused with `403 installation_rejected`, and nothing is stored.
    public var attestation: AppAttestation?
    /// A DeviceCheck token (`DCDevice.generateToken()`, standard base64), for servers with a DeviceCheck key: the
    /// device's two bits say whether it already had its sign-up grant, across reinstalls.
    public var deviceCheckToken: String?
    /// Creates the request.
    public init(deviceId: String, attestation: AppAttestation? = nil, deviceCheckToken: String? = nil) {
        self.deviceId = deviceId
        self.attestation = attestation
        self.deviceCheckToken = deviceCheckToken
    }
}

/// The tokens returned by every sign-in and refresh.
public struct SessionTokens: Codable, Hashable, Sendable {
    /// The account these tokens act for.
    public var userId: String
    /// `true` until the account is linked to an email and password.
    public var isGuest: Bool
    /// Short-lived signed token for `Authorization: Bearer`.
    public var accessToken: String
    /// Single-use token that buys the next pair at `POST /v1/auth/refresh`.
    public var refreshToken: String
    /// Seconds until `accessToken` expires.
    public var expiresIn: Int
    /// What a sign-in with `merge: true` carried from the calling guest into this account.
    public var merged: MergeSummary?

    /// Creates a token pair.
    public init(userId: String, isGuest: Bool, accessToken: String, refreshToken: String, expiresIn: Int, merged: MergeSummary? = nil) {
        self.userId = userId
        self.isGuest = isGuest
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresIn = expiresIn
        self.merged = merged
    }
}

/// `POST /v1/auth/refresh`.
public struct RefreshRequest: Codable, Hashable, Sendable {
    /// The refresh token from the last sign-in or refresh.
    public var refreshToken: String
    /// Creates the request.
    public init(refreshToken: String) { self.refreshToken = refreshToken }
}

/// `POST /v1/auth/link` and `POST /v1/auth/sign-in`.
public struct CredentialsRequest: Codable, Hashable, Sendable {
    /// The account's email address.
    public var email: String
    /// The account's password: 8 characters to 72 bytes of UTF-8 (bcrypt's limit), compared after NFKC normalisation.
    public var password: String
    /// Sign-in only, called with a guest's access token: carry the guest's progress into the account
    /// (``SessionTokens/merged``). Without it the sign-in leaves the guest as it is.
    public var merge: Bool?
    /// Creates the request.
    public init(email: String, password: String, merge: Bool? = nil) {
        self.email = email
        self.password = password
        self.merge = merge
    }
}

/// `GET /v1/me`: the caller's account.
public struct Me: Codable, Hashable, Sendable {
    /// Stable account id; it survives linking a guest to an email.
    public var userId: String
    /// `true` until linked to an email and password.
    public var isGuest: Bool
    /// The linked email, if any.
    public var email: String?
    /// IANA time zone whose midnight resets daily quotas.
    public var timezone: String
    /// The app's language tag for this user, if set.
    public var language: String?
    /// Premium entitlement end, if any.
    public var premiumUntil: Date?
    /// When the account was created.
    public var createdAt: Date
    /// Whether the user proved they receive mail at `email` (a verification code, or a password reset code,
    /// redeemed); `false` for guests. Absent from older servers' answers: decoded as `false`.
    public var emailVerified: Bool

    /// Creates the account view.
    public init(
        userId: String, isGuest: Bool, email: String?, timezone: String, language: String?,
        premiumUntil: Date?, createdAt: Date, emailVerified: Bool = false
    ) {
        self.userId = userId
        self.isGuest = isGuest
        self.email = email
        self.timezone = timezone
        self.language = language
        self.premiumUntil = premiumUntil
        self.createdAt = createdAt
        self.emailVerified = emailVerified
    }

    private enum CodingKeys: String, CodingKey {
        case userId, isGuest, email, timezone, language, premiumUntil, createdAt, emailVerified
    }

    /// Decodes the account view; `emailVerified` is `false` when absent (an older server, a value cached before it existed).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        userId = try container.decode(String.self, forKey: .userId)
        isGuest = try container.decode(Bool.self, forKey: .isGuest)
        email = try container.decodeIfPresent(String.self, forKey: .email)
        timezone = try container.decode(String.self, forKey: .timezone)
        language = try container.decodeIfPresent(String.self, forKey: .language)
        premiumUntil = try container.decodeIfPresent(Date.self, forKey: .premiumUntil)
        createdAt = try container.decode(Date.self, forKey: .createdAt)
        emailVerified = try container.decodeIfPresent(Bool.self, forKey: .emailVerified) ?? false
    }
}

/// `POST /v1/auth/password`: change the signed-in account's password.
public struct ChangePasswordRequest: Codable, Hashable, Sendable {
    /// The password the account has now.
    public var currentPassword: String
    /// The new password: 8 characters to 72 bytes of UTF-8, as at ``CredentialsRequest/password``.
    public var newPassword: String
    /// Creates the request.
    public init(currentPassword: String, newPassword: String) {
        self.currentPassword = currentPassword
        self.newPassword = newPassword
    }
}

/// `POST /v1/auth/password/forgot`: mail a password reset code to the account of an email, if there is one.
public struct ForgotPasswordRequest: Codable, Hashable, Sendable {
    /// The account's email address.
    public var email: String
    /// Creates the request.
    public init(email: String) { self.email = email }
}

/// `POST /v1/auth/password/reset`: set a new password with the code mailed by `POST /v1/auth/password/forgot`.
public struct ResetPasswordRequest: Codable, Hashable, Sendable {
    /// The account's email address.
    public var email: String
    /// The code from the mail: 8 digits.
    public var code: String
    /// The new password: 8 characters to 72 bytes of UTF-8, as at ``CredentialsRequest/password``.
    public var newPassword: String
    /// Creates the request.
    public init(email: String, code: String, newPassword: String) {
        self.email = email
        self.code = code
        self.newPassword = newPassword
    }
}

/// The answer to `POST /v1/auth/password/reset`: the password is set and every session of the account has ended.
public struct PasswordResetResult: Codable, Hashable, Sendable {
    /// Whether the reset removed the account's Sign in with Apple identity: it does when the account's email was not
    /// verified before (the code is the first proof that the email is the user's, and an Apple ID linked before it
    /// may be someone else's). Sign in with the new password, then with Apple from that session, to link it again.
    public var appleSignInRemoved: Bool
    /// Creates the answer.
    public init(appleSignInRemoved: Bool) { self.appleSignInRemoved = appleSignInRemoved }
}

/// `POST /v1/auth/email/verify`: prove the account's email with the code mailed by `POST /v1/auth/email/verify/send`.
public struct VerifyEmailRequest: Codable, Hashable, Sendable {
    /// The code from the mail: 8 digits.
    public var code: String
    /// Creates the request.
    public init(code: String) { self.code = code }
}

/// `PATCH /v1/me`: fields left out are unchanged.
public struct UpdateMeRequest: Codable, Hashable, Sendable {
    /// An IANA time zone name such as `Europe/Paris`.
    public var timezone: String?
    /// A language tag such as `en` or `pt-BR`.
    public var language: String?
    /// Creates the request.
    public init(timezone: String? = nil, language: String? = nil) {
        self.timezone = timezone
        self.language = language
    }
}

/// `DELETE /v1/me`'s answer: the account is gone. What Apple still bills is said here, since deleting an account does
/// not cancel its App Store subscription: it renews at Apple until the user cancels it in the App Store's subscriptions
/// page (App Store guideline 5.1.1(v) asks apps to tell the user how).
public struct AccountDeletion: Codable, Hashable, Sendable {
    /// When the App Store subscription the account had (redeemed through Tally) runs until, if one was running at the
    /// deletion; nil: none.
    public var subscriptionActiveUntil: Date?

    /// Creates the answer.
    public init(subscriptionActiveUntil: Date?) { self.subscriptionActiveUntil = subscriptionActiveUntil }

    /// Whether a subscription was running: show the user how to cancel it at Apple.
    public var hadActiveSubscription: Bool { subscriptionActiveUntil != nil }

    private enum CodingKeys: String, CodingKey { case subscriptionActiveUntil }

    /// Decodes the answer (an absent key is no subscription).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        subscriptionActiveUntil = try container.decodeIfPresent(Date.self, forKey: .subscriptionActiveUntil)
    }

    /// Encodes the answer, `null` when no subscription was running (said, not left out).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(subscriptionActiveUntil, forKey: .subscriptionActiveUntil)
    }
}
