import ExampleSupport
import Foundation
import OracleCore
import TallyClient
import Testing

/// What the iOS screen shows around its purchases and failures, computed by the code the StoreKit layer and the
/// SwiftUI screen call (OracleStoreKit.swift, OracleView.swift), on Linux, without a server.
@Suite("Oracle's screen", .timeLimit(.minutes(1)))
@MainActor
struct ScreenTests {
    /// A session whose client points at no server (nothing here sends a request), in a temporary home.
    static func withSession(storefront: (any Storefront)? = nil, _ body: @MainActor (OracleSession) async throws -> Void) async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("oracle-screen-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: home) }
        let client = try OracleSetup.client(server: URL(string: "http://127.0.0.1:9")!, home: home)
        try await body(OracleSession(client: client, storefront: storefront))
    }

    @Test("The App Store's products are offered in the screen's order; one it did not return is named, not silently left out")
    func productsInOrderOrNamed() throws {
        let answered = [OracleProduct.premium, OracleProduct.tokens100, OracleProduct.premium]
        #expect(try OracleProduct.ordered(answered, id: { $0 }) == [OracleProduct.tokens100, OracleProduct.premium])
        let error = #expect(throws: StorefrontError.self) { try OracleProduct.ordered([OracleProduct.tokens100], id: { $0 }) }
        #expect(error?.message.contains(OracleProduct.premium) == true && error?.message.contains(OracleProduct.tokens100) == false)
        #expect(throws: StorefrontError.self) { try OracleProduct.ordered([String](), id: { $0 }) }
    }

    @Test("A failed tap is shown in the alert until dismissed; a cancelled one is not")
    func attemptShowsFailures() async throws {
        try await Self.withSession { session in
            #expect(!session.isShowingFailure)
            await session.attempt { try await session.buyTokens() }.value  // this session sells nothing
            #expect(session.failure == "this build sells nothing" && session.isShowingFailure)
            session.isShowingFailure = false  // the alert's OK
            #expect(session.failure == nil)
            await session.attempt { throw CancellationError() }.value  // the screen went away
            #expect(session.failure == nil)
            await session.attempt { try session.ask("Will it rain?") }.value  // nobody signed in: nowhere to keep it
            #expect(session.isShowingFailure && session.history.isEmpty, "\(session.failure ?? "")")
        }
    }

    @Test("The SDK's errors are told as what the user can do")
    func messages() {
        #expect(OracleSession.message(for: ClientError(.offline)).contains("cannot be reached"))
        #expect(OracleSession.message(for: ClientError(.unauthorized)).contains("sign in again"))
        #expect(OracleSession.message(for: ClientError(.insufficientTokens)).contains("buy tokens"))
        let claimed = ClientError(.server, status: 409, serverCode: .purchaseClaimed, message: "claimed")
        #expect(OracleSession.message(for: claimed).contains("another account"))
        let signIn = ClientError(.server, status: 409, serverCode: .signInRequired, message: "sign in")
        #expect(OracleSession.message(for: signIn).contains("restore purchases again"))
        let other = ClientError(.server, status: 500, serverCode: .internalError, message: "the server failed")
        #expect(OracleSession.message(for: other) == "the server failed")
        #expect(OracleSession.message(for: StorefrontError(message: "the store is closed")) == "the store is closed")
    }

    @Test("A restore shows premium at once, says when there was nothing to restore, and why a subscription stayed with another account")
    func restoreIsShown() async throws {
        try await Self.withSession { session in
            session.showRestored(premiumUntil: nil, purchases: 0, refusals: [])
            #expect(!session.isPremium && session.notice?.contains("Nothing to restore") == true && session.failure == nil)
            session.showRestored(premiumUntil: Date().addingTimeInterval(30 * 86_400), purchases: 1, refusals: [])
            #expect(session.isPremium && session.freeReadingsLeft == nil && session.notice == nil && session.failure == nil)
            let refusal = ClientError(.server, status: 409, serverCode: .signInRequired, message: "sign in")
            session.showRestored(premiumUntil: nil, purchases: 0, refusals: [refusal])
            #expect(!session.isPremium && session.failure?.contains("sign in to it") == true)
        }
    }

    @Test("A transaction the server refused for good is shown, naming the product")
    func refusedTransactionIsShown() async throws {
        try await Self.withSession { session in
            session.showRefused(productId: OracleProduct.tokens100, error: ClientError(.server, status: 400, serverCode: .wrongBundle))
            #expect(session.failure?.contains(OracleProduct.tokens100) == true && session.failure?.contains("wrong_bundle") == true)
        }
    }
}
