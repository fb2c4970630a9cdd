import Foundation
import NIOCore
import NIOHTTP1
import Synchronization
import TallyAPI
import TallyClient

/// Logical reads an SDK app asked for, against what reached the server: the honest version of the
/// field notes' "10k users = 1 request" (a client-side cache and coalescer only merge inside one app).
public struct SDKReadCounts: Sendable, Hashable, Codable {
    /// Reads the app's views asked for (`client.fetch`).
    public var logicalReads = 0
    /// `GET` requests that reached the server.
    public var serverReads = 0
    /// Of those, answered `304 Not Modified` (an ETag revalidation).
    public var notModified = 0
    /// Reads answered from the SDK's cache without a request.
    public var cacheHits = 0
    /// Reads that joined another identical read already in flight.
    public var coalesced = 0
    /// Request attempts the SDK retried.
    public var retried = 0

    /// Adds another app's counts.
    public static func + (lhs: Self, rhs: Self) -> Self {
        Self(
            logicalReads: lhs.logicalReads + rhs.logicalReads, serverReads: lhs.serverReads + rhs.serverReads,
            notModified: lhs.notModified + rhs.notModified, cacheHits: lhs.cacheHits + rhs.cacheHits,
            coalesced: lhs.coalesced + rhs.coalesced, retried: lhs.retried + rhs.retried)
    }
}

/// A simulated app user driven through the real TallyClient SDK: guest session, query cache, coalescing,
/// optimistic actions. Its grants come from the app's backend over a connection of its own.
final class SDKUser {
    let client: Client
    let transport: SDKTransport
    let admin: RawUser
    let actions: ScenarioActions
    let recorder: LatencyRecorder
    var rng: SplitMix
    var logicalReads = 0

    init(admin: RawUser, transport: SDKTransport, baseURL: URL, recorder: LatencyRecorder) {
        self.admin = admin
        self.transport = transport
        actions = admin.actions
        self.recorder = recorder
        rng = SplitMix(seed: admin.rng.next())
        var configuration = ClientConfiguration(baseURL: baseURL, secureStore: MemorySecureStore())
        configuration.transport = transport
        client = Client(configuration: configuration)
    }

    var expectation: ExpectedBooks { admin.expectation }

    /// Signs in through the SDK, then the backend grants the initial tokens.
    func setUp(initialGrant: Int64) async -> Bool {
        let start = ContinuousClock.now
        do {
            let user = try await client.signInAsGuest()
            admin.expectation.userId = user.userId
            recorder.record("setup.sdk-sign-in", scheduled: start, completed: .now, outcome: .expected(200))
        } catch {
            recorder.record("setup.sdk-sign-in", scheduled: start, completed: .now, outcome: .failed("\(error)"))
            return false
        }
        if initialGrant > 0 { await admin.run(.grant, scheduled: .now) }
        return true
    }

    /// Runs one SDK operation, measured from `scheduled`.
    func run(_ kind: OperationKind, scheduled: ContinuousClock.Instant) async {
        switch kind {
        case .sdkAction: await perform(scheduled: scheduled)
        case .grant: await admin.run(.grant, scheduled: scheduled)
        default: await openScreen(scheduled: scheduled)
        }
    }

    /// A screen whose header, badge and paywall each read the wallet, and whose footer reads the quotas.
    private func openScreen(scheduled: ContinuousClock.Instant) async {
        let client = self.client
        logicalReads += 4
        let failure: String? = await withTaskGroup(of: String?.self) { group in
            for _ in 0..<3 { group.addTask { await Self.failure { _ = try await client.fetch(client.walletQuery) } } }
            group.addTask { await Self.failure { _ = try await client.fetch(client.quotasQuery) } }
            return await group.reduce(nil) { $0 ?? $1 }
        }
        recorder.record(OperationKind.sdkScreen.rawValue, scheduled: scheduled, completed: .now, outcome: failure.map { .failed($0) } ?? .expected(200))
    }

    private func perform(scheduled: ContinuousClock.Instant) async {
        let name = rng.next() & 1 == 0 ? actions.quotaAction : actions.tokenAction
        let outcome: Outcome
        do {
            let result = try await client.perform(name)
            admin.expectation.record(result, prices: actions.prices)
            outcome = .expected(200)
        } catch ClientError.Code.insufficientTokens, ClientError.Code.quotaExhausted {
            admin.expectation.refused += 1
            outcome = .expected(402)
        } catch let error as ClientError where error.code == .server {
            outcome = .unexpected(error.status ?? 0)
        } catch {
            // The SDK gave up without a definitive answer: the server may have charged it, at most once.
            admin.expectation.uncertain[name, default: 0] += 1
            outcome = .failed("\(error)")
        }
        recorder.record(OperationKind.sdkAction.rawValue, scheduled: scheduled, completed: .now, outcome: outcome)
    }

    /// This app's read counts.
    func readCounts() -> SDKReadCounts {
        let summary = client.metrics.summary()
        let sent = transport.sent
        return SDKReadCounts(
            logicalReads: logicalReads, serverReads: sent.reads, notModified: sent.notModified, cacheHits: summary.cacheHits,
            coalesced: summary.coalesced, retried: summary.retried)
    }

    private static func failure(_ body: () async throws -> Void) async -> String? {
        do {
            try await body()
            return nil
        } catch {
            return "\(error)"
        }
    }
}
