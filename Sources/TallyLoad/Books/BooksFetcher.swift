import Foundation
import NIOHTTP1
import TallyAPI

/// Reads one account's books through the admin listener: wallet and quotas, then every ledger entry page.
struct BooksFetcher {
    let admin: AdminPool
    let adminKey: String

    private struct AdminUser: Decodable {
        var wallet: Wallet
        var quotas: [Quota]
    }

    func books(of userId: String) async -> ServerBooks? {
        let auth = [("Authorization", "Bearer \(adminKey)")]
        guard let response = await admin.send(LoadRequest(.GET, "/admin/v1/users/\(userId)", headers: auth), operation: "books"),
            response.status == 200, let user = APICaller.decode(AdminUser.self, response)
        else { return nil }
        var entries: [LedgerEntry] = []
        var cursor: String?
        repeat {
            let query = cursor.map { "&cursor=\($0)" } ?? ""
            let request = LoadRequest(.GET, "/admin/v1/users/\(userId)/entries?limit=100\(query)", headers: auth)
            guard let page = await admin.send(request, operation: "books"), page.status == 200,
                let decoded = APICaller.decode(Page<LedgerEntry>.self, page)
            else { return nil }
            entries += decoded.items
            cursor = decoded.nextCursor
        } while cursor != nil
        return ServerBooks(wallet: user.wallet, quotas: user.quotas, entries: entries)
    }
}
