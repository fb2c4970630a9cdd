import Foundation
import TallyAPI

extension Client {
    /// The signed-in user's ledger, newest first, one page per iteration: every grant, charge and hold
    /// settlement, each with the balance after it. Pages are fetched as the loop asks for them (the cursor is
    /// kept for you) and are not cached: history is read, not observed.
    ///
    /// ```swift
    /// for try await page in tally.ledgerPages(pageSize: 20) {
    ///     entries += page
    ///     if entries.count >= 60 { break }   // stop when the screen is full; no further request is made
    /// }
    /// ```
    public func ledgerPages(pageSize: Int = 50) -> LedgerPages { LedgerPages(client: self, pageSize: max(1, min(pageSize, 100))) }

    /// One page of entries after `cursor` (nil: the newest).
    func ledgerPage(cursor: String?, limit: Int) async throws -> Page<LedgerEntry> {
        var path = "/v1/wallet/entries?limit=\(limit)"
        if let cursor {
            guard let escaped = cursor.addingPercentEncoding(withAllowedCharacters: .alphanumerics) else {
                throw ClientError(.invalidInput, message: "cursor")
            }
            path += "&cursor=\(escaped)"
        }
        let response = try await executor.send(
            Endpoint(method: "GET", path: path, operation: "GET /v1/wallet/entries", kind: .read), auth: session)
        return try decode(Page<LedgerEntry>.self, response.body)
    }
}

/// The ledger as an asynchronous sequence of pages, newest first; made by ``Client/ledgerPages(pageSize:)``.
public struct LedgerPages: AsyncSequence, Sendable {
    /// One page of ledger entries.
    public typealias Element = [LedgerEntry]

    let client: Client
    let pageSize: Int

    /// Fetches the next page when asked; ends after the last one.
    public struct AsyncIterator: AsyncIteratorProtocol {
        let client: Client
        let pageSize: Int
        var cursor: String?
        var finished = false

        /// The next page, or nil after the last one.
        public mutating func next() async throws -> [LedgerEntry]? {
            guard !finished else { return nil }
            let page = try await client.ledgerPage(cursor: cursor, limit: pageSize)
            cursor = page.nextCursor
            finished = page.nextCursor == nil
            if page.items.isEmpty { return nil }
            return page.items
        }
    }

    /// Starts from the newest entry.
    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(client: client, pageSize: pageSize) }
}
