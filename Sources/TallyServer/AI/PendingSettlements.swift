import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import TallyAPI
import TallyStore

/// What ends an AI call's hold: the capture of its charge, or its release.
struct Settlement: Sendable, Hashable {
    /// Whose hold.
    let userId: String
    /// The hold.
    let holdId: String
    /// The gateway model called.
    let model: String
    /// What the call is charged; `nil`: the hold is released.
    let charge: ChatCharge?
    /// Why a hold is released, for the ledger.
    var why = ""
    /// How a premium user's call was paid instead of tokens: captured at 0, or released with its quota use given back.
    var premium: PremiumPaid?

    /// The settlement of `call`.
    init(_ call: HeldCall, charge: ChatCharge?, why: String = "") {
        (userId, holdId, model, self.charge, self.why, premium) = (call.userId, call.holdId, call.chat.model.name, charge, why, call.premium)
    }

    /// The ledger's note for a capture: the counts charged (`(estimated)` when no usage came), and for a premium
    /// call what it would have cost in tokens (it is charged 0).
    var note: String {
        guard let charge else { return "ai \(model) \(why)" }
        return "ai \(model) prompt=\(charge.promptTokens) completion=\(charge.completionTokens)" + (charge.fromUsage ? "" : " (estimated)")
            + (premium == nil ? "" : " (premium: would cost \(charge.amount))")
    }

    /// The tokens the capture takes: the charge's, 0 for a premium call.
    var charged: Int64 { premium == nil ? charge?.amount ?? 0 : 0 }

    /// The same settlement on `account`: its guest was merged there while the call ran, and its hold moved with it.
    func moved(to account: String) -> Settlement {
        Settlement(userId: account, holdId: holdId, model: model, charge: charge, why: why, premium: premium)
    }

    private init(userId: String, holdId: String, model: String, charge: ChatCharge?, why: String, premium: PremiumPaid?) {
        (self.userId, self.holdId, self.model, self.charge, self.why, self.premium) = (userId, holdId, model, charge, why, premium)
    }

    /// The capture, or the release (which gives a premium call's quota use back).
    var command: Command {
        guard charge != nil else { return .releaseHold(userId: userId, holdId: holdId, note: note, giveBack: premium?.use) }
        return .captureHold(userId: userId, holdId: holdId, amount: charged, note: note)
    }
}

/// AI calls whose settlement the database could not take because it was unavailable (an answer that finished during
/// a PostgreSQL outage), kept in this process and tried again, with ``backoffDelay(attempt:first:maximum:unit:)``
/// on the injected clock, until the database answers: the user pays what was generated, once. A service: the retries
/// run in ``run()``.
///
/// A retry can come after the hold expired (a hold outlives the longest call, not an outage), and a housekeeping
/// sweep or one of the user's requests may release it whole first. So a capture refused because the hold is no
/// longer open reads the hold: captured or released, an earlier attempt committed (its answer was lost) and nothing
/// is left to do; expired, the charge is taken as a debit of its own under the user's idempotency key
/// `tally.ai capture/<hold>` (its space keeps it apart from clients' keys), in the transaction that releases the
/// hold if no sweep did: at most once, and never below zero (what is available, when less). A process that stops
/// with settlements pending loses them (logged): their holds expire whole, as a crashed server's do.
final class PendingSettlements: Service, Sendable {
    let store: any TallyStorage
    let clock: any TallyClock
    let notifier: any ChangeNotifier
    let logger: Logger
    private let pending = Mutex<[Settlement]>([])
    private let wakeUps: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation
    /// The most settlements kept; beyond, a settlement is dropped (logged) and its hold expires whole.
    static let capacity = 100_000

    init(store: any TallyStorage, clock: any TallyClock, notifier: any ChangeNotifier, logger: Logger = Logger(label: "tally.ai")) {
        (self.store, self.clock, self.notifier, self.logger) = (store, clock, notifier, logger)
        (wakeUps, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Keeps `settlement` to try again once the database answers.
    func add(_ settlement: Settlement) {
        let kept = pending.withLock { pending in
            guard pending.count < Self.capacity else { return false }
            pending.append(settlement)
            return true
        }
        if kept {
            logger.warning("the database could not settle an AI call's hold; retrying until it answers", metadata: ["hold": "\(settlement.holdId)"])
            wake.yield()
        } else {
            logger.error("too many AI settlements pending; this hold expires unsettled", metadata: ["hold": "\(settlement.holdId)"])
        }
    }

    /// Settlements waiting for the database.
    var count: Int { pending.withLock { $0.count } }

    /// Tries the pending settlements whenever one is added, and again after a backoff while the database is
    /// unavailable, until the application shuts down.
    func run() async throws {
        try? await cancelWhenGracefulShutdown { [self] in
            for await _ in wakeUps {
                var attempt = 0
                while await retry() > 0 {
                    attempt += 1
                    try await clock.sleep(for: backoffDelay(attempt: attempt, first: 1, maximum: 30, unit: .random(in: 0...1)))
                }
            }
        }
        let left = count
        if left > 0 { logger.error("AI settlements left pending at shutdown; their holds expire whole", metadata: ["count": "\(left)"]) }
    }

    /// Tries every pending settlement once; how many are left (the database is still unavailable).
    func retry() async -> Int {
        let batch = pending.withLock { pending in
            defer { pending = [] }
            return pending
        }
        var left: [Settlement] = []
        for settlement in batch where await !attempt(settlement) { left.append(settlement) }
        return pending.withLock { pending in
            pending = left + pending
            return pending.count
        }
    }

    /// Settles `settlement` now; `false` when the database is still unavailable.
    func attempt(_ settlement: Settlement) async -> Bool {
        do {
            _ = try await store.execute(settlement.command, idempotency: nil, now: clock.now) { _ in StoredResponse(status: 200, body: []) }
            notifier.walletChanged(userId: settlement.userId)
            logger.notice("settled an AI call's hold after the database returned", metadata: ["hold": "\(settlement.holdId)"])
            return true
        } catch let error as StoreError where error.code == .unavailable {
            return false
        } catch let error as StoreError where error.code == .userNotFound {
            // The guest was merged while the call ran: its hold is the account's now.
            guard let account = try? await store.user(id: settlement.userId)?.mergedInto else { return true }
            return await attempt(settlement.moved(to: account))
        } catch let error as StoreError where error.code == .holdNotOpen {
            // A release finds the hold settled (an earlier attempt) or expired (released whole): done either way.
            return settlement.charge == nil ? true : await chargeExpired(settlement)
        } catch {
            logger.error("could not settle an AI call's hold; it expires unsettled", metadata: ["hold": "\(settlement.holdId)", "error": "\(error)"])
            return true
        }
    }

    /// Charges a capture whose hold is no longer open: nothing when an earlier attempt settled it, else a debit under
    /// `tally.ai capture/<hold>`; `false` when the database is still unavailable.
    private func chargeExpired(_ settlement: Settlement) async -> Bool {
        guard let charge = settlement.charge, settlement.charged > 0 else { return true }
        let key = IdempotencyKey(
            scope: settlement.userId, key: "tally.ai capture/" + settlement.holdId,
            fingerprint: Secrets.sha256("ai capture " + settlement.holdId))
        var amount = charge.amount
        do {
            let now = clock.now
            guard let hold = try await store.hold(id: settlement.holdId, userId: settlement.userId) else { return true }
            switch hold.status {
            case .captured, .released: return true
            case .open where hold.expiresAt > now: return false
            case .open, .expired: break
            }
            while true {
                let reason = "\(settlement.holdId) \(settlement.note) (after its hold expired"
                    + (amount < charge.amount ? ": \(amount) of \(charge.amount) available)" : ")")
                do {
                    _ = try await store.execute(
                        .performAction(userId: settlement.userId, action: ActionSpec(name: reason, tokens: amount), quotaLimit: nil),
                        idempotency: key, now: clock.now
                    ) { _ in StoredResponse(status: 200, body: []) }
                    notifier.walletChanged(userId: settlement.userId)
                    logger.notice("charged an AI call whose hold expired during an outage", metadata: ["hold": "\(settlement.holdId)"])
                    return true
                } catch let error as StoreError where error.code == .insufficientTokens {
                    let available = error.state?.wallet.available ?? 0
                    guard available > 0, available < amount else { throw error }
                    amount = available
                }
            }
        } catch let error as StoreError where error.code == .unavailable {
            return false
        } catch {
            logger.error(
                "could not charge an AI call whose hold expired", metadata: ["hold": "\(settlement.holdId)", "error": "\(error)"])
            return true
        }
    }
}
