import Foundation
import NIOHTTP1
import TallyAPI

/// The two actions the scenario uses, read from the server's price list.
public struct ScenarioActions: Sendable, Hashable {
    /// An action drawing on a daily quota first.
    public var quotaAction: String
    /// An action always paid in tokens.
    public var tokenAction: String
    /// What the books checker needs to know about prices.
    public var prices: PriceList
}

/// A simulated app user speaking HTTP directly: its own guest identity and keep-alive connection,
/// one request at a time, and a record of every answer it got (its ``ExpectedBooks``).
final class RawUser {
    let index: Int
    let deviceId: String
    let caller: APICaller
    /// The connections to this user's server's admin listener (grants, the books check).
    let admin: AdminPool
    let adminKey: String
    let actions: ScenarioActions
    var rng: SplitMix
    var session: SessionTokens?
    var etag: String?
    var expectation = ExpectedBooks(userId: "")
    private var grants = 0

    init(index: Int, seed: UInt64, caller: APICaller, admin: AdminPool, adminKey: String, actions: ScenarioActions) {
        self.index = index
        rng = SplitMix(seed: seed ^ (UInt64(bitPattern: Int64(index)) &* 0x9E37_79B9))
        // Not from the seed: every run's users are new accounts, also against a database that holds the
        // accounts of earlier runs (a rate sweep on one PostgreSQL), whose books would otherwise mix in.
        var secret = SystemRandomNumberGenerator()
        deviceId = (0..<4).map { _ in String(format: "%016llx", secret.next() as UInt64) }.joined()
        self.caller = caller
        self.admin = admin
        self.adminKey = adminKey
        self.actions = actions
    }

    private var recorder: LatencyRecorder { caller.recorder }

    /// Signs in as a guest (the same device id always gives the same user) and takes the initial grant.
    func setUp(initialGrant: Int64) async -> Bool {
        let start = ContinuousClock.now
        guard await signIn(operation: "setup.sign-in", scheduled: start) else { return false }
        if initialGrant > 0 { await grant(initialGrant, operation: "setup.grant", scheduled: ContinuousClock.now) }
        return session != nil
    }

    /// Runs one operation of the mix, measured from `scheduled`.
    func run(_ kind: OperationKind, scheduled: ContinuousClock.Instant) async {
        switch kind {
        case .walletRead: await readWallet(scheduled: scheduled)
        case .quotasRead:
            _ = await call(kind.rawValue, LoadRequest(.GET, "/v1/quotas"), expected: [200], scheduled: scheduled)
        case .quotaAction: await perform(actions.quotaAction, operation: kind.rawValue, abandonFirst: false, scheduled: scheduled)
        case .tokenAction: await perform(actions.tokenAction, operation: kind.rawValue, abandonFirst: false, scheduled: scheduled)
        case .abandonedAction:
            let name = rng.next() & 1 == 0 ? actions.quotaAction : actions.tokenAction
            await perform(name, operation: kind.rawValue, abandonFirst: true, scheduled: scheduled)
        case .hold: await holdAndSettle(scheduled: scheduled)
        case .grant: await grant(10, operation: kind.rawValue, scheduled: scheduled)
        case .badRequest: await badRequest(scheduled: scheduled)
        case .sdkScreen, .sdkAction, .syncPush, .syncPull: await readWallet(scheduled: scheduled)
        }
    }

    // MARK: - Operations

    func signIn(operation: String, scheduled: ContinuousClock.Instant) async -> Bool {
        let request = LoadRequest(.POST, "/v1/auth/guest", body: APICaller.json(GuestSignInRequest(deviceId: deviceId)))
        guard let response = await call(operation, request, expected: [200, 201], scheduled: scheduled, via: .anonymous),
            let tokens = APICaller.decode(SessionTokens.self, response)
        else { return false }
        session = tokens
        expectation.userId = tokens.userId
        return true
    }

    private func readWallet(scheduled: ContinuousClock.Instant) async {
        var headers: [(String, String)] = []
        if let etag { headers.append(("If-None-Match", etag)) }
        let response = await call(OperationKind.walletRead.rawValue, LoadRequest(.GET, "/v1/wallet", headers: headers), expected: [200, 304], scheduled: scheduled)
        if let response, response.status == 200 { etag = response.headers.first(name: "ETag") }
    }

    private func perform(_ name: String, operation: String, abandonFirst: Bool, scheduled: ContinuousClock.Instant) async {
        let request = LoadRequest(.POST, "/v1/actions/\(name)", headers: [(TallyHeader.idempotencyKey, UUID().uuidString)])
        if abandonFirst {
            try? await caller.connection.abandon(authorized(request))
        }
        guard let response = await call(operation, request, expected: [200, 402], scheduled: scheduled) else {
            expectation.uncertain[name, default: 0] += 1
            return
        }
        recordAction(response)
    }

    func recordAction(_ response: LoadResponse) {
        guard response.status == 200 else {
            expectation.refused += 1
            return
        }
        guard let result = APICaller.decode(ActionResult.self, response) else { return }
        expectation.record(result, prices: actions.prices)
    }

    private func holdAndSettle(scheduled: ContinuousClock.Instant) async {
        let amount = Int64(1 + rng.next() % 5)
        let create = LoadRequest(
            .POST, "/v1/wallet/holds", headers: [(TallyHeader.idempotencyKey, UUID().uuidString)],
            body: APICaller.json(CreateHoldRequest(amount: amount, ttlSeconds: 3_600)))
        guard let response = await call("hold.create", create, expected: [201, 402], scheduled: scheduled) else {
            expectation.uncertainHolds += 1
            return
        }
        guard response.status == 201, let hold = APICaller.decode(Hold.self, response) else {
            expectation.refused += 1
            return
        }
        expectation.holds[hold.holdId] = .open(amount: amount)
        let key = [(TallyHeader.idempotencyKey, UUID().uuidString)]
        if rng.next() & 1 == 0 {
            let charge = Int64(rng.next() % UInt64(amount + 1))
            let capture = LoadRequest(
                .POST, "/v1/wallet/holds/\(hold.holdId)/capture", headers: key, body: APICaller.json(CaptureHoldRequest(amount: charge)))
            switch await call("hold.capture", capture, expected: [200], scheduled: .now)?.status {
            case 200: expectation.holds[hold.holdId] = .captured(amount: amount, charged: charge)
            case nil: expectation.holds[hold.holdId] = .unknown(amount: amount)
            default: break
            }
        } else {
            let release = LoadRequest(.DELETE, "/v1/wallet/holds/\(hold.holdId)", headers: key)
            switch await call("hold.release", release, expected: [200], scheduled: .now)?.status {
            case 200: expectation.holds[hold.holdId] = .released(amount: amount)
            case nil: expectation.holds[hold.holdId] = .unknown(amount: amount)
            default: break
            }
        }
    }

    private func grant(_ amount: Int64, operation: String, scheduled: ContinuousClock.Instant) async {
        grants += 1
        let reason = "load:\(index):\(grants)"
        let request = LoadRequest(
            .POST, "/admin/v1/users/\(expectation.userId)/grants",
            headers: [("Authorization", "Bearer \(adminKey)"), (TallyHeader.idempotencyKey, UUID().uuidString)],
            body: APICaller.json(GrantRequest(amount: amount, reason: reason)))
        switch await call(operation, request, expected: [201], scheduled: scheduled, via: .admin)?.status {
        case 201: expectation.grants[reason] = amount
        case nil: expectation.uncertainGrants[reason] = amount
        default: break
        }
    }

    /// One of four requests that must be refused and leave nothing behind.
    private func badRequest(scheduled: ContinuousClock.Instant) async {
        let key = [(TallyHeader.idempotencyKey, UUID().uuidString)]
        let (request, status): (LoadRequest, Int) =
            switch rng.next() % 4 {
            case 0:
                (LoadRequest(.POST, "/v1/wallet/holds", headers: key, body: APICaller.json(CreateHoldRequest(amount: 1_000_000_000, ttlSeconds: 60))), 402)
            case 1: (LoadRequest(.POST, "/v1/actions/no-such-action", headers: key), 404)
            case 2: (LoadRequest(.POST, "/v1/wallet/holds", headers: key, body: Array("{\"amount\":".utf8)), 400)
            default: (LoadRequest(.POST, "/v1/wallet/holds/\(UUID().uuidString)/capture", headers: key, body: Array("{\"amount\":1}".utf8)), 404)
            }
        if await call(OperationKind.badRequest.rawValue, request, expected: [status], scheduled: scheduled) != nil {
            expectation.refused += 1
        }
    }

    // MARK: - Sending

    private func authorized(_ request: LoadRequest) -> LoadRequest {
        var request = request
        if let session { request.headers.append(("Authorization", "Bearer \(session.accessToken)")) }
        return request
    }

    /// How a request is sent: as the signed-in user, without a token, or by the app's backend to the admin listener.
    enum Sender {
        case user, anonymous, admin
    }

    /// Sends until definitive, signs in again once on 401, and records the latency from `scheduled`
    /// with the outcome. Nil when no answer came; a mutation without an answer counts as unsettled.
    func call(
        _ operation: String, _ request: LoadRequest, expected: Set<Int>, scheduled: ContinuousClock.Instant,
        via sender: Sender = .user
    ) async -> LoadResponse? {
        var response: LoadResponse?
        switch sender {
        case .user: response = await caller.send(authorized(request), operation: operation)
        case .anonymous: response = await caller.send(request, operation: operation)
        case .admin: response = await admin.send(request, operation: operation)
        }
        if sender == .user, response?.status == 401, await signIn(operation: "auth.guest-again", scheduled: .now) {
            response = await caller.send(authorized(request), operation: operation)
        }
        let outcome: Outcome =
            if let response { expected.contains(response.status) ? .expected(response.status) : .unexpected(response.status) } else { .failed("no answer") }
        recorder.record(operation, scheduled: scheduled, completed: .now, outcome: outcome)
        if response == nil, request.method != .GET { expectation.unsettled += 1 }
        return response
    }
}
