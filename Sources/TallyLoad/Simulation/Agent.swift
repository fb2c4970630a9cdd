import Foundation

/// One simulated user, raw HTTP or SDK, as the run drives it. `@unchecked Sendable` because it is used
/// by one task at a time by construction: set-up, then its own inbox (or one closed-loop worker), then
/// its books check, each phase starting after the previous one ended.
final class Agent: @unchecked Sendable {
    private let raw: RawUser
    private let sdk: SDKUser?
    /// Set for a user that syncs documents.
    let sync: SyncUser?
    /// The operation weights for this kind of user.
    let mix: [OperationKind: Int]
    private(set) var isReady = false

    init(raw: RawUser, mix: [OperationKind: Int]) {
        self.raw = raw
        sdk = nil
        sync = nil
        self.mix = mix
    }

    init(sdk: SDKUser, mix: [OperationKind: Int]) {
        raw = sdk.admin
        self.sdk = sdk
        sync = nil
        self.mix = mix
    }

    init(sync: SyncUser, mix: [OperationKind: Int]) {
        raw = sync.raw
        sdk = nil
        self.sync = sync
        self.mix = mix
    }

    func setUp(initialGrant: Int64) async -> Bool {
        try? await raw.caller.connection.connect()
        if let sdk {
            isReady = await sdk.setUp(initialGrant: initialGrant)
        } else if let sync {
            isReady = await sync.setUp(initialGrant: initialGrant)
        } else {
            isReady = await raw.setUp(initialGrant: initialGrant)
        }
        return isReady
    }

    func run(_ kind: OperationKind, scheduled: ContinuousClock.Instant) async {
        if let sdk {
            await sdk.run(kind, scheduled: scheduled)
        } else if let sync {
            await sync.run(kind, scheduled: scheduled)
        } else {
            await raw.run(kind, scheduled: scheduled)
        }
    }

    var expectation: ExpectedBooks { raw.expectation }

    var readCounts: SDKReadCounts? { sdk?.readCounts() }

    func books() async -> ServerBooks? {
        await BooksFetcher(admin: raw.admin, adminKey: raw.adminKey).books(of: raw.expectation.userId)
    }

    func close() async {
        await raw.caller.connection.close()
        await sdk?.transport.close()
    }
}
