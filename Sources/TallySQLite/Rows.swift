import Foundation
import GRDB
import TallyStore

/// Decoding of rows into the store's records.
extension UserRecord {
    init(row: Row) {
        self.init(
            id: row["id"], email: row["email"], timezone: row["timezone"], language: row["language"],
            premiumUntil: (row["premium_until"] as Int64?).map(Date.init(millis:)),
            createdAt: Date(millis: row["created_at"]), emailVerifiedAt: (row["email_verified_at"] as Int64?).map(Date.init(millis:)),
            purchasedPremiumUntil: (row["purchased_premium_until"] as Int64?).map(Date.init(millis:)),
            hasAppleIdentity: (row["apple_sub"] as String?) != nil, mergedInto: row["merged_into"])
    }
}

extension WalletState {
    init(row: Row) {
        self.init(balance: row["balance"], held: row["held"], version: row["version"])
    }

    /// From `balance, held, version` at columns `index`, `index + 1`, `index + 2` (by position: a lookup by
    /// name lowercases the name on every call, which showed in the action profile).
    init(row: Row, at index: Int) {
        self.init(balance: row[index], held: row[index + 1], version: row[index + 2])
    }
}

/// An account's user, wallet and installation (a guest's; `nil` for a linked account) in one row, decoded by position.
enum AccountRow {
    /// The columns, in the order ``decode(_:)`` reads them.
    static let columns =
        "u.id, u.email, u.timezone, u.language, u.premium_until, u.created_at, w.balance, w.held, w.version, u.installation, u.email_verified_at, "
        + "u.purchased_premium_until, u.apple_sub IS NOT NULL, u.merged_into"

    static func decode(_ row: Row) -> (user: UserRecord, wallet: WalletState, installation: String?) {
        let user = UserRecord(
            id: row[0], email: row[1], timezone: row[2], language: row[3], premiumUntil: (row[4] as Int64?).map(Date.init(millis:)),
            createdAt: Date(millis: row[5]), emailVerifiedAt: (row[10] as Int64?).map(Date.init(millis:)),
            purchasedPremiumUntil: (row[11] as Int64?).map(Date.init(millis:)), hasAppleIdentity: row[12], mergedInto: row[13])
        return (user, WalletState(row: row, at: 6), row[9])
    }
}

extension HoldRecord {
    init(row: Row) {
        self.init(
            id: row["id"], userId: row["user_id"], amount: row["amount"],
            status: HoldStatus(rawValue: row["status"]) ?? .open, capturedAmount: row["captured_amount"],
            createdAt: Date(millis: row["created_at"]), expiresAt: Date(millis: row["expires_at"]))
    }
}

extension LedgerEntryRecord {
    init(row: Row) {
        self.init(
            id: row["id"], kind: EntryKind(rawValue: row["kind"]) ?? .grant, amount: row["amount"],
            heldChange: row["held_change"], balanceAfter: row["balance_after"], reason: row["reason"],
            createdAt: Date(millis: row["created_at"]), reference: row["reference"])
    }
}
