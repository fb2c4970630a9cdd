import Foundation
import TallyAPI
import TallyStore

/// What the operator's two doors — the admin API (``AdminController``) and the console (``ConsoleController``) — read
/// and change accounts with: the store and its clock, the quotas as the API shows them, the command runner (idempotency
/// keys, in-flight claims, ledger metrics) and the audit log.
struct OperatorTools: Sendable {
    let store: any TallyStorage
    let clock: any TallyClock
    /// The quotas as the API shows them.
    let views: QuotaViews
    /// Runs grants and premium changes under their idempotency keys.
    let runner: CommandRunner
    /// The audit rows of grants and premium changes.
    let audit: AuditLog
}
