import Foundation
import TallyAPI

/// Whether the user has premium now, as the server last said.
public struct PremiumStatus: Sendable, Hashable {
    /// True while the premium entitlement has not ended.
    public var isActive: Bool
    /// When it ends; nil when the user never had premium (or it was revoked).
    public var until: Date?

    /// Creates a status.
    public init(isActive: Bool, until: Date?) {
        self.isActive = isActive
        self.until = until
    }
}

extension Client {
    /// The profile query with a five-minute freshness window; its premium is confirmed live by the event stream.
    public var meQuery: Query<Me> { .me() }

    /// Changes the user's time zone (whose midnight resets the daily quotas) and language; nil leaves a field
    /// as it is. The profile and the quotas are confirmed from the answer and a refetch.
    /// The SDK sets the device's zone at every sign-in (``ClientConfiguration/timeZone``); call this when the
    /// app lets the user choose.
    @discardableResult
    public func updateProfile(timezone: String? = nil, language: String? = nil) async throws -> Me {
        let body = try TallyJSON.encoder().encode(UpdateMeRequest(timezone: timezone, language: language))
        let meQuery = self.meQuery
        let me = try await mutate(
            Mutation<Me>(
                method: "PATCH", path: "/v1/me", operation: "PATCH /v1/me", body: body,
                optimistic: [
                    .update(meQuery) { me in
                        var me = me
                        if let timezone { me.timezone = timezone }
                        if let language { me.language = language }
                        return me
                    }
                ],
                confirm: { [Confirmation.of(meQuery, $0)].compactMap { $0 } }))
        // Another zone moves the quota windows: what is cached counts uses in the old day.
        if timezone != nil { invalidate(key: quotasQuery.key) }
        return me
    }

    /// Whether the user has premium, from the cached profile (``meQuery``: fetched when absent or older than five
    /// minutes; `forceRefresh` asks the server). While the app is active the event stream keeps it current: a premium
    /// granted or revoked on the server updates the cached profile, and its observers, within a second.
    public func premiumStatus(forceRefresh: Bool = false) async throws -> PremiumStatus {
        let me = try await fetch(meQuery, forceRefresh: forceRefresh)
        return PremiumStatus(isActive: me.premiumUntil.map { $0 > configuration.clock.now } ?? false, until: me.premiumUntil)
    }

    /// Sets the device's time zone on the server after a sign-in, unless it is already the user's
    /// (best effort: a failure leaves the zone as it was and is retried at the next sign-in).
    func adoptDeviceTimeZone() async {
        guard let zone = configuration.timeZone?.identifier, value(meQuery)?.timezone != zone else { return }
        _ = try? await updateProfile(timezone: zone)
    }
}
