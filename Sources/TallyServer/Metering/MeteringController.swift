import Foundation
import Hummingbird
import Logging
import TallyAPI
import TallyStore

/// `/v1/quotas`, `/v1/actions` and `POST /v1/actions/{name}`: the one call an app makes when its user does something that costs.
struct MeteringController {
    let store: any TallyStorage
    let clock: any TallyClock
    /// The actions and quotas.
    let catalog: Catalog
    /// The quotas as the API shows them.
    let views: QuotaViews
    /// Runs actions under their idempotency keys.
    let runner: CommandRunner
    /// Withholds free uses from unattested calls where App Attest is enforced.
    let integrity: DeviceIntegrity

    func addPublicRoutes(to group: RouterGroup<TallyRequestContext>) {
        group.get("actions", use: actions)
    }

    func addRoutes(to group: RouterGroup<AuthenticatedContext>) {
        group.get("quotas", use: quotas)
        group.post("actions/:name", use: perform)
    }

    @Sendable func actions(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let items = catalog.actions.map { ActionPrice(name: $0.name, quota: $0.quota, tokens: $0.tokens) }
        return JSONResponse.make(body: ActionList(items: items), headers: [.cacheControl: "public, max-age=300"])
    }

    @Sendable func quotas(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        guard let state = try await store.accountState(userId: context.identity.userId, now: clock.now) else {
            throw APIError(.unauthorized, "A valid access token is required.")
        }
        return JSONResponse.make(body: QuotaList(items: views.quotas(for: state)))
    }

    @Sendable func perform(_ request: Request, context: AuthenticatedContext) async throws -> Response {
        guard let name = context.parameters.get("name"), let action = catalog.action(named: name) else {
            throw APIError(.notFound, "No such action.")
        }
        var limit = action.quota.flatMap { catalog.quota(named: $0)?.daily }
        let userId = context.identity.userId
        let views = self.views
        // A free use needs an assertion where App Attest is enforced: without one the action is paid (or refused).
        var freeWithheld = false
        if limit != nil {
            freeWithheld = try await !integrity.allowsFreeValue(
                request, userId: userId, body: nil, logger: context.logger)
        }
        if freeWithheld { limit = nil }
        do {
            return try await run(action, limit: limit, request: request, userId: userId, views: views)
        } catch where freeWithheld {
            throw await DailyGenerationsController.attestationRequired(
                error, quota: action.quota, userId: userId, store: store, clock: clock, views: views)
        }
    }

    private func run(_ action: ActionSpec, limit: Int?, request: Request, userId: String, views: QuotaViews) async throws -> Response {
        try await runner.run(
            .performAction(userId: userId, action: action, quotaLimit: limit), request: request, scope: userId,
            requestFingerprint: CommandRunner.fingerprint(request, body: String?.none), keyPolicy: .required
        ) { outcome in
            let (payment, charged): (ActionPayment, Int64) =
                switch outcome.payment {
                case .charge(let tokens): (.tokens, tokens)
                case .premium: (.premium, 0)
                default: (.quota, 0)
                }
            return ActionResult(
                action: action.name, paidWith: payment, tokensCharged: charged, wallet: Wallet(outcome.state.wallet),
                quotas: views.quotas(for: outcome.state))
        }
    }
}
