import Foundation
import TallyAPI
import TallyStore

/// Renders stored state into the wire views: quotas as seen at `now`, wallets with `available`.
struct QuotaViews: Sendable {
    let catalog: Catalog
    let clock: any TallyClock
    /// The quotas that AI models with `premium: {quota: name}` count premium users' calls against: not
    /// `unlimited` for a premium user, since those calls stop when the quota is used up.
    var countedForPremium: Set<String> = []

    /// Every configured quota of the account, with windows that ended reset to zero; for a guest, the counter
    /// that limits it of its own and its installation's (``QuotaWindow/binding(_:installation:)``). A premium user's
    /// quotas are `unlimited`, except those in ``countedForPremium``.
    func quotas(for state: AccountState) -> [Quota] {
        let now = clock.now
        let timeZone = TimeZone(identifier: state.user.timezone) ?? .gmt
        let premium = state.user.isPremium(at: now)
        return catalog.quotas.map { spec in
            let own = QuotaWindow.current(state.counters[spec.name], now: now, timeZone: timeZone)
            let installation = state.installation.map {
                QuotaWindow.current($0.counters[spec.name], now: now, timeZone: timeZone)
            }
            let counter = QuotaWindow.binding(own, installation: installation)
            return Quota(name: spec.name, limit: spec.daily, used: counter.used, resetsAt: counter.windowEnd, unlimited: premium && !countedForPremium.contains(spec.name))
        }
    }
}

extension Wallet {
    /// The wire view of a stored wallet.
    init(_ state: WalletState) {
        self.init(balance: state.balance, held: state.held, version: state.version)
    }
}

extension LedgerEntry {
    /// The wire view of a stored entry.
    init(_ record: LedgerEntryRecord) {
        self.init(
            id: record.id, kind: record.kind.rawValue, amount: record.amount, heldChange: record.heldChange,
            balanceAfter: record.balanceAfter, reason: record.reason, createdAt: record.createdAt)
    }
}

extension Hold {
    /// The wire view of a stored hold and the wallet after the call.
    init(_ record: HoldRecord, wallet: WalletState) {
        self.init(
            holdId: record.id, amount: record.amount, status: record.status.rawValue,
            capturedAmount: record.capturedAmount, expiresAt: record.expiresAt, wallet: Wallet(wallet))
    }
}

extension Me {
    /// The wire view of a stored account.
    init(_ user: UserRecord) {
        self.init(
            userId: user.id, isGuest: user.isGuest, email: user.email, timezone: user.timezone, language: user.language,
            premiumUntil: user.combinedPremiumUntil, createdAt: user.createdAt, emailVerified: user.emailVerifiedAt != nil)
    }
}
