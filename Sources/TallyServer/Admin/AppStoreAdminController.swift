import Foundation
import Hummingbird
import Logging
import TallyAPI
import TallyAppStore
import TallyStore

/// The admin API's App Store routes, present with an `appStore:` section (they need `appStore.serverAPI`):
/// `POST /admin/v1/users/{id}/purchases/reconcile` and `POST /admin/v1/appstore/replay-notifications`
/// (``AppStoreReconciliation``).
struct AppStoreAdminController {
    /// Nil without `appStore.serverAPI`: the routes then answer 404, naming what to configure.
    let reconciliation: AppStoreReconciliation?

    private func configured() throws -> AppStoreReconciliation {
        guard let reconciliation else {
            throw APIError(.notFound, "Reconciliation needs the App Store Server API: configure appStore.serverAPI.")
        }
        return reconciliation
    }

    /// Adds the routes to the admin group (behind its key check).
    func addRoutes(to group: RouterGroup<TallyRequestContext>) {
        group.post("users/:userId/purchases/reconcile", use: reconcile)
        group.post("appstore/replay-notifications", use: replay)
    }

    @Sendable func reconcile(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let userId = try AdminController.userId(context)
        let body = try await JSONBody<ReconcileRequest>.read(request, context: context).value
        return JSONResponse.make(body: try await configured().reconcile(userId: userId, orderId: body.orderId, logger: context.logger))
    }

    @Sendable func replay(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let body = try await JSONBody<ReplayNotificationsRequest>.read(request, context: context).value
        return JSONResponse.make(body: try await configured().replay(body, logger: context.logger))
    }
}
