import Foundation
import GRDB
import TallyStore

/// Decoding of rows into the store's records.
extension UserRecord {
    init(row: Row) {
        self.init(
            id: row["id"], email: row["email"], timezone: row["timezone"], language: row["language"],
            premiumUntil: (row["premium_until"] as Int64?).map(Date.init(millis:)),
            createdAt: Date(millis: row["created_at"]))
    }
}

extension WalletState {
    init(row: Row) {
        self.init(balance: row["balance"], held: row["held"], version: row["version"])
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
            createdAt: Date(millis: row["created_at"]))
    }
}
