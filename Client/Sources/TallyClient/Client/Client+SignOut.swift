import Foundation
import TallyAPI

extension Client {
    /// Signs out, at once and offline too: the session and every cached value, pending answer, persisted entry,
    /// background revalidation, stream and synced document file of the user are removed here before it returns (in
    /// the processes sharing the secure store too, at their next request; requests of theirs in flight are cancelled),
    /// and the server session is revoked — now when the server is reachable, else as soon as it is again (a small
    /// queue in the secure store that survives a relaunch).
    /// The installation secret stays: it belongs to the device, not the user; so does the price list.
    ///
    /// Local changes to synced documents that the server has not confirmed yet would be lost with the document
    /// file, so they make it refuse, changing nothing:
    ///
    /// ```swift
    /// do {
    ///     try await tally.signOut()
    /// } catch let error as ClientError where error.code == .pendingWrites {
    ///     // "2 changes are not saved yet": sync first (try await tally.sync.now()), or drop them:
    ///     try await tally.signOut(discardingPendingWrites: true)
    /// }
    /// ```
    ///
    /// - Parameter discardingPendingWrites: true drops unsynced changes instead of refusing.
    /// - Throws: ``ClientError/Code/pendingWrites`` with ``ClientError/pendingWrites`` when changes are unsynced.
    public func signOut(discardingPendingWrites: Bool = false) async throws {
        let pending = syncStatus.pendingMutations
        if pending > 0, !discardingPendingWrites {
            throw ClientError(
                .pendingWrites, message: "\(pending) local changes are not synced yet: sync first, or sign out discarding them",
                pendingWrites: pending)
        }
        await session.signOut()
        await session.scheduleRevocations()
    }

    /// Deletes the user's account on the server — its wallet, ledger, documents and sessions, on every device —
    /// then removes everything of it from this device: the session, the cached values, the synced document file
    /// (unsynced changes included) and the installation secret; observers end. What App Store guideline 5.1.1(v)
    /// asks of an app that lets users create accounts. Needs the server: offline it throws and changes nothing.
    /// After it, ``signInAsGuest()`` starts a new guest.
    ///
    /// Deleting the account does not cancel its App Store subscription: Apple keeps billing the user until they cancel
    /// it there. The answer says whether one was running; if so, tell the user and offer the App Store's page
    /// (`PurchasesClient.showManageSubscriptions(in:)` on iOS):
    ///
    /// ```swift
    /// let deletion = try await tally.deleteAccount()
    /// if deletion.hadActiveSubscription {
    ///     notice = "Your subscription renews until you cancel it in the App Store."
    /// }
    /// ```
    ///
    /// - Throws: a ``ClientError`` when the server could not be reached or refused; nothing was deleted then.
    @discardableResult
    public func deleteAccount() async throws -> AccountDeletion {
        try await session.deleteAccount()  // the document file is gone when this returns, as at sign-out
    }
}
