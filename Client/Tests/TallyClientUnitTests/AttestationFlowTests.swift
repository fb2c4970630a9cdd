import Foundation
import Synchronization
import TallyAPI
@testable import TallyClient
import TallyTestKit
import Testing

/// App Attest in the SDK (issue 47), without a device or a server: a fake App Attest service that counts its calls and
/// fails when told, and a scripted server. One key per installation, attested at the first guest sign-in; a new key
/// after a refusal; the assertion on each request that spends free value, over the right bytes; the nonce from a fresh
/// challenge only where the request has no Idempotency-Key; nothing on a device that cannot attest; and the retry of a
/// failed attestation on the client's clock, never sleeping.
@Suite("App Attest flow", .timeLimit(.minutes(2)))
struct AttestationFlowTests {
    // MARK: Rules

    @Test("Actions assert over their Idempotency-Key; daily generations and merging sign-ins over a challenge; nothing else")
    func whichRequestsAssert() throws {
        func nonce(_ method: String, _ path: String, headers: [String: String] = [:], body: String? = nil) -> AttestationFlow.Nonce? {
            let body = body.map { Data($0.utf8) }
            return AttestationFlow.nonce(for: TransportRequest(method: method, path: path, headers: headers, body: body, timeout: 1))
        }
        #expect(nonce("POST", "/v1/actions/reading", headers: ["Idempotency-Key": "k1"]) == .idempotencyKey("k1"))
        #expect(nonce("POST", "/v1/actions/reading", headers: ["idempotency-key": "k2"]) == .idempotencyKey("k2"))
        #expect(nonce("POST", "/v1/actions/reading") == .challenge)
        #expect(nonce("GET", "/v1/ai/daily/todays_prediction?sign=leo") == .challenge)
        #expect(nonce("POST", "/v1/auth/sign-in", body: #"{"email":"a@b.c","password":"p","merge":true}"#) == .challenge)
        #expect(nonce("POST", "/v1/auth/apple", body: #"{"identityToken":"t","nonce":"n","merge":true}"#) == .challenge)
        #expect(nonce("POST", "/v1/auth/sign-in", body: #"{"email":"a@b.c","password":"p"}"#) == nil)
        #expect(nonce("POST", "/v1/auth/apple", body: #"{"identityToken":"t","nonce":"n","merge":false}"#) == nil)
        #expect(nonce("GET", "/v1/actions") == nil)
        #expect(nonce("GET", "/v1/wallet") == nil)
        #expect(nonce("POST", "/v1/auth/guest", body: #"{"deviceId":"d"}"#) == nil)
        #expect(nonce("POST", "/v1/holds", headers: ["Idempotency-Key": "k"]) == nil)

        // The client data is AssertionHeader's, over the path without its query and the body's SHA-256.
        #expect(SHA256.hex(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let request = TransportRequest(method: "get", path: "/v1/ai/daily/today?sign=leo", timeout: 1)
        let expected = AssertionHeader.clientData(
            method: "GET", path: "/v1/ai/daily/today", nonce: "c1", bodySHA256: SHA256.hex([]))
        #expect(AttestationFlow.clientData(for: request, nonce: "c1") == expected)
        #expect(AttestationFlow.assertionHash(for: request, nonce: "c1") == Data(SHA256.digest(expected)))
        #expect(AttestationFlow.attestationHash(challenge: "c1") == Data(SHA256.digest(Array("c1".utf8))))
    }

    @Test("Backoff doubles from the first delay up to the cap; failures are sorted by what follows them")
    func backoffAndFailures() {
        let delays = (0...8).map { AttestationFlow.retryDelay(afterFailures: $0, first: 30, maximum: 3600) }
        #expect(delays == [0, 30, 60, 120, 240, 480, 960, 1920, 3600])
        #expect(AttestationFlow.retryDelay(afterFailures: 500, first: 30, maximum: 3600) == 3600)

        #expect(AttestationFlow.classify(AppAttestError.invalidKey) == .invalidKey)
        #expect(AttestationFlow.classify(AppAttestError.serverUnavailable) == .later)
        #expect(AttestationFlow.classify(AppAttestError.unknownSystemFailure) == .later)
        #expect(AttestationFlow.classify(AppAttestError.featureUnsupported) == .never)
        #expect(AttestationFlow.classify(ClientError(.server, status: 403, serverCode: .installationRejected)) == .invalidKey)
        #expect(AttestationFlow.classify(ClientError(.server, status: 404, serverCode: .notFound)) == .never)
        #expect(AttestationFlow.classify(ClientError(.server, status: 503, serverCode: ErrorCode(rawValue: "http_503"))) == .later)
        #expect(AttestationFlow.classify(ClientError(.offline)) == .later)
        #expect(AttestationFlow.classify(ClientError(.unauthorized)) == .signedOut)
        #expect(AttestationFlow.classify(SecureStoreError(name: "app-attest-key", reason: "locked")) == .later)
    }

    // MARK: Key and attestation

    @Test("One key per installation: attested at the first guest sign-in, reused by the next launch, never sent again")
    func keyMadeOnceAndAttestedOnce() async throws {
        let (store, server, attest) = (MemorySecureStore(), AttestStubServer(), FakeAppAttest())
        let devices = FakeDeviceTokens(token: Data([1, 2, 3]))
        let first = Self.client(store, server, attest, devices: devices)
        try await first.signInAsGuest()

        let signIns = server.guestSignIns
        let attestation = try #require(signIns.first?.attestation)
        #expect(signIns.count == 1 && attestation.keyId == "key-1" && attestation.challenge == "challenge-1")
        #expect(attestation.attestation == Data("attestation of key-1".utf8).base64EncodedString())
        #expect(signIns.first?.deviceCheckToken == "AQID")
        // The attestation's client data hash is the SHA-256 of the challenge's bytes.
        #expect(attest.attestCalls.map(\.hash) == [Data(SHA256.digest(Array("challenge-1".utf8)))])
        #expect(try Self.storedKey(store) == AttestationFlow.Key(id: "key-1", attested: true))
        #expect(first.attestation.isSupported)
        #expect(try await first.attestation.attest())  // attested already: nothing sent
        #expect(server.requests(.post, "/v1/auth/attestation").isEmpty)

        // The next launch (same secure store): the session is restored, then the guest signs out and in again.
        let next = Self.client(store, server, attest, devices: devices)
        #expect(try await next.restore() != nil)
        try await next.signOut()
        try await next.signInAsGuest()
        try #require(server.guestSignIns.count == 2)
        #expect(server.guestSignIns[1].attestation == nil)
        #expect(server.guestSignIns[1].deviceCheckToken == "AQID")
        #expect(attest.keysMade == 1 && attest.attestCalls.count == 1)
        #expect(server.requests(.post, "/v1/auth/attestation/challenge").count == 1)
        // … and still asserts with the first launch's key.
        try await next.perform("reading")
        #expect(try Self.header(server.requests(.post, "/v1/actions/reading").last).keyId == "key-1")
    }

    @Test("A refused attestation (installation_rejected) drops the key; a new one is attested once more")
    func reKeyAfterRejection() async throws {
        let (store, server, attest) = (MemorySecureStore(), AttestStubServer(), FakeAppAttest())
        server.rejectAttestedGuestSignIns = 1
        let client = Self.client(store, server, attest)
        try await client.signInAsGuest()

        #expect(server.guestSignIns.map { $0.attestation?.keyId } == ["key-1", "key-2"])
        #expect(server.guestSignIns.map { $0.attestation?.challenge } == ["challenge-1", "challenge-2"])
        #expect(attest.keysMade == 2)
        #expect(try Self.storedKey(store) == AttestationFlow.Key(id: "key-2", attested: true))

        // Refused twice: the sign-in goes unattested, and nothing more is tried in this launch.
        let (otherStore, otherServer) = (MemorySecureStore(), AttestStubServer())
        otherServer.rejectAttestedGuestSignIns = 5
        let other = Self.client(otherStore, otherServer, FakeAppAttest())
        try await other.signInAsGuest()
        #expect(otherServer.guestSignIns.map { $0.attestation?.keyId } == ["key-1", "key-2", nil])
        #expect(try Self.storedKey(otherStore) == nil)
        try await other.perform("reading")
        #expect(otherServer.requests(.post, "/v1/actions/reading").last?.headers[AssertionHeader.name] == nil)
    }

    @Test("A key the device no longer has (a restore to a new device) is replaced, at attestation and at assertion")
    func invalidKeyIsReplaced() async throws {
        let (store, server, attest, clock) = (MemorySecureStore(), AttestStubServer(), FakeAppAttest(), ManualClock())
        // Restored from another device's backup: a key id this device's Secure Enclave does not hold.
        store.write(try JSONEncoder().encode(AttestationFlow.Key(id: "restored", attested: false)), for: AttestationFlow.keyItem)
        attest.failAttestations([.invalidKey])
        let client = Self.client(store, server, attest, clock: clock)
        try await client.signInAsGuest()
        #expect(attest.attestCalls.map(\.keyId) == ["restored", "key-1"])
        #expect(server.guestSignIns.first?.attestation?.keyId == "key-1")
        #expect(try Self.storedKey(store) == AttestationFlow.Key(id: "key-1", attested: true))

        // An attested key the device refuses to sign with (the app reinstalled: the keychain kept its id, the Secure
        // Enclave lost it): the request goes unasserted, and a new key is attested at once for the signed-in user.
        attest.failAssertions([.invalidKey])
        try await client.perform("reading", intent: "one")
        #expect(server.requests(.post, "/v1/actions/reading").last?.headers[AssertionHeader.name] == nil)
        await client.attestor?.backgroundFinished()  // no backoff first: the clock never moves in this test
        #expect(server.attestations.map(\.keyId) == ["key-2"])
        #expect(try Self.storedKey(store) == AttestationFlow.Key(id: "key-2", attested: true))
        try await client.perform("reading", intent: "two")
        #expect(try Self.header(server.requests(.post, "/v1/actions/reading").last).keyId == "key-2")
    }

    @Test("A device that cannot attest sends no attestation, no challenge and no header; nor does a client without App Attest")
    func unsupportedDegradesToUnattested() async throws {
        for attest in [FakeAppAttest(supported: false), nil] {
            let (store, server) = (MemorySecureStore(), AttestStubServer())
            let client = Self.client(store, server, attest, devices: FakeDeviceTokens(token: Data([9]), supported: false))
            try await client.signInAsGuest()
            try await client.perform("reading")
            _ = try await client.ai.daily("today")
            try #require(server.guestSignIns.count == 1)
            #expect(server.guestSignIns[0].attestation == nil)
            #expect(server.guestSignIns[0].deviceCheckToken == nil)
            #expect(server.requests(.post, "/v1/auth/attestation").isEmpty)
            #expect(server.requests.allSatisfy { $0.headers[AssertionHeader.name] == nil })
            #expect(attest.map { $0.keysMade == 0 && $0.attestCalls.isEmpty && $0.assertCalls.isEmpty } ?? true)
            #expect(try await client.attestation.attest() == false)
            #expect(!client.attestation.isSupported)
        }
        #if !canImport(DeviceCheck)
        #expect(ClientConfiguration(baseURL: URL(string: "http://127.0.0.1:9")!, secureStore: MemorySecureStore()).attestation == nil)
        #endif
    }

    // MARK: Assertions

    @Test("An action asserts over its Idempotency-Key, with no challenge; the fake signed exactly that client data")
    func actionAssertsOverItsIdempotencyKey() async throws {
        let (store, server, attest) = (MemorySecureStore(), AttestStubServer(), FakeAppAttest())
        let client = Self.client(store, server, attest)
        try await client.signInAsGuest()
        let challenges = server.requests(.post, "/v1/auth/attestation/challenge").count

        try await client.perform("reading", intent: "message-7")
        let request = try #require(server.requests(.post, "/v1/actions/reading").last)
        let key = try #require(request.headers[TallyHeader.idempotencyKey])
        let header = try Self.header(request)
        #expect(header.keyId == "key-1" && header.challenge == nil)
        let signed = try #require(attest.assertCalls.last)
        #expect(header.assertion == signed.assertion.base64EncodedString())
        let clientData = AssertionHeader.clientData(method: "POST", path: "/v1/actions/reading", nonce: key, bodySHA256: SHA256.hex([]))
        #expect(signed.keyId == "key-1" && signed.hash == Data(SHA256.digest(clientData)))
        #expect(server.requests(.post, "/v1/auth/attestation/challenge").count == challenges)
    }

    @Test("A daily generation and a merging sign-in assert over a fresh challenge, carried in the header")
    func challengeForDailyAndMerges() async throws {
        let (store, server, attest) = (MemorySecureStore(), AttestStubServer(), FakeAppAttest())
        let client = Self.client(store, server, attest)
        try await client.signInAsGuest()

        _ = try await client.ai.daily("today", parameters: ["sign": "leo"])
        let daily = try #require(server.requests(.get, "/v1/ai/daily/today").last)
        let dailyHeader = try Self.header(daily)
        #expect(dailyHeader.challenge == "challenge-2")
        let dailyData = AssertionHeader.clientData(
            method: "GET", path: "/v1/ai/daily/today", nonce: "challenge-2", bodySHA256: SHA256.hex([]))
        #expect(attest.assertCalls.last?.hash == Data(SHA256.digest(dailyData)))

        _ = try await client.signIn(email: "ada@example.com", password: "correct horse battery", merge: true)
        let merge = try #require(server.requests(.post, "/v1/auth/sign-in").last)
        let mergeHeader = try Self.header(merge)
        #expect(mergeHeader.challenge == "challenge-3" && mergeHeader.keyId == "key-1")
        let mergeData = AssertionHeader.clientData(
            method: "POST", path: "/v1/auth/sign-in", nonce: "challenge-3", bodySHA256: SHA256.hex(Array(merge.body ?? Data())))
        #expect(attest.assertCalls.last?.hash == Data(SHA256.digest(mergeData)))

        // A sign-in that does not merge spends nothing free: no challenge, no header.
        try await client.signOut()
        _ = try await client.signIn(email: "ada@example.com", password: "correct horse battery")
        #expect(server.requests(.post, "/v1/auth/sign-in").last?.headers[AssertionHeader.name] == nil)
        #expect(server.requests(.post, "/v1/auth/attestation/challenge").count == 3)
    }

    // MARK: One asserted request at a time

    @Test("Asserted requests go one at a time: the next is signed once the previous was answered, counters in order")
    func assertedRequestsInCounterOrder() async throws {
        let (store, server, log) = (MemorySecureStore(), AttestStubServer(), AttestEventLog())
        let attest = FakeAppAttest(log: log)
        let transport = HoldingTransport(server, log: log)
        let client = Self.client(store, server, attest, transport: transport)
        try await client.signInAsGuest()
        let attestor = try #require(client.attestor)
        let reading = "/v1/actions/reading"

        // Two actions tapped quickly: the first is in flight (held by the network), the second waits, unsigned.
        transport.hold(reading)
        let first = Task { try await client.perform("reading", intent: "first") }
        await transport.waitUntilHeld(reading)
        let second = Task { try await client.perform("reading", intent: "second") }
        await Self.queued(1, attestor, orAsserted: 2, log)
        #expect(attest.assertCalls.count == 1)

        // A request that asserts nothing is not held behind them.
        let list = try await client.executor.send(.get("/v1/actions"), auth: client.userTokens())
        #expect(list.status == 200 && transport.heldCount == 1 && attest.assertCalls.count == 1)

        transport.release(reading)
        _ = try await Self.value(first)
        _ = try await Self.value(second)
        // The second assertion was made after the first answer, and the counters reached the transport rising.
        #expect(log.events.filter { $0.counter != nil } == [
            .asserted(1), .sent(reading, 1), .answered(reading, 1), .asserted(2), .sent(reading, 2), .answered(reading, 2),
        ])
        #expect(server.requests(.post, reading).map(HoldingTransport.counter) == [1, 2])
    }

    @Test("A cancelled waiter leaves the queue without signing; a cancelled request in flight lets the next go")
    func cancelledAssertionsDoNotBlock() async throws {
        let (store, server, log) = (MemorySecureStore(), AttestStubServer(), AttestEventLog())
        let attest = FakeAppAttest(log: log)
        let transport = HoldingTransport(server, log: log)
        let client = Self.client(store, server, attest, transport: transport)
        try await client.signInAsGuest()
        let attestor = try #require(client.attestor)
        let reading = "/v1/actions/reading"

        // An action in flight; behind it another action, then a daily generation (over a challenge).
        transport.hold(reading)
        let first = Task { try await client.perform("reading", intent: "one") }
        await transport.waitUntilHeld(reading)
        let cancelled = Task { try await client.perform("reading", intent: "two") }
        await Self.queued(1, attestor, orAsserted: 2, log)
        let daily = Task { try await client.ai.daily("today") }
        await Self.queued(2, attestor, orAsserted: 3, log)
        cancelled.cancel()
        await #expect(throws: (any Error).self) { try await Self.value(cancelled) }
        #expect(transport.heldCount == 1 && attest.assertCalls.count == 1)

        transport.release(reading)
        _ = try await Self.value(first)
        _ = try await Self.value(daily)
        // The cancelled action never signed nor went out: the daily generation has the next counter.
        #expect(attest.assertCalls.count == 2)
        #expect(server.requests(.post, reading).map(HoldingTransport.counter) == [1])
        #expect(HoldingTransport.counter(server.requests(.get, "/v1/ai/daily/today").last) == 2)

        // An asserted request cancelled while in flight hands over too.
        transport.hold(reading)
        let abandoned = Task { try await client.perform("reading", intent: "three") }
        await transport.waitUntilHeld(reading)
        let next = Task { try await client.perform("reading", intent: "four") }
        await Self.queued(1, attestor, orAsserted: 4, log)
        abandoned.cancel()
        await #expect(throws: (any Error).self) { try await Self.value(abandoned) }
        _ = try await Self.value(next)
        #expect(server.requests(.post, reading).map(HoldingTransport.counter) == [1, 4])
    }

    @Test("The assertion gate: first come first served; a cancelled waiter leaves the queue at once and never holds it")
    func gateOrderAndCancellation() async throws {
        let gate = AssertionGate()
        let entered = Locked<[String]>([])
        try await gate.enter()
        func waiter(_ name: String) -> Task<Void, any Error> {
            Task {
                try await gate.enter()
                entered.withLock { $0.append(name) }
                gate.leave()
            }
        }
        let a = waiter("a")
        await gate.waitForWaiters(1)
        let b = waiter("b")
        await gate.waitForWaiters(2)
        let c = waiter("c")
        await gate.waitForWaiters(3)
        b.cancel()
        // Thrown while the gate is still held: b left the queue, it was not handed the gate.
        await #expect(throws: CancellationError.self) { try await Self.value(b) }
        #expect(entered.withLock { $0 }.isEmpty)
        gate.leave()
        try await Self.value(a)
        try await Self.value(c)
        #expect(entered.withLock { $0 } == ["a", "c"])

        // Cancelled before asking: it neither waits nor takes the gate, which stays free.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await gate.enter()
        }
        await #expect(throws: CancellationError.self) { try await Self.value(early) }
        try await gate.enter()
        gate.leave()
    }

    // MARK: Later attestation

    @Test("Apple's service down at sign-in: the guest signs in unattested, and the attestation is retried with backoff on the clock")
    func retriedWithBackoff() async throws {
        let (store, server, attest, clock) = (MemorySecureStore(), AttestStubServer(), FakeAppAttest(), ManualClock())
        attest.failAttestations([.serverUnavailable, .serverUnavailable])
        let client = Self.client(store, server, attest, clock: clock)
        let start = clock.now
        try await client.signInAsGuest()
        #expect(server.guestSignIns.count == 1 && server.guestSignIns[0].attestation == nil)
        try await client.perform("reading", intent: "before")
        #expect(server.requests(.post, "/v1/actions/reading").last?.headers[AssertionHeader.name] == nil)

        try await clock.waitForSleeper(until: start.addingTimeInterval(30), tolerance: 0.5)
        #expect(attest.attestCalls.count == 1)
        clock.advance(by: 30)
        try await clock.waitForSleeper(until: start.addingTimeInterval(90), tolerance: 0.5)  // failed again: 60 s more
        #expect(attest.attestCalls.count == 2 && server.attestations.isEmpty)
        clock.advance(by: 60)
        await client.attestor?.backgroundFinished()

        #expect(attest.attestCalls.count == 3 && attest.keysMade == 1)
        #expect(server.attestations.map(\.keyId) == ["key-1"] && server.attestations.first?.challenge == "challenge-3")
        let post = try #require(server.requests(.post, "/v1/auth/attestation").first)
        #expect(post.headers["Authorization"] != nil)
        #expect(try Self.storedKey(store) == AttestationFlow.Key(id: "key-1", attested: true))
        try await client.perform("reading", intent: "after")
        #expect(try Self.header(server.requests(.post, "/v1/actions/reading").last).keyId == "key-1")
    }

    @Test("A session restored from before App Attest (an upgrade) attests at once, once")
    func restoredSessionAttests() async throws {
        let (store, server) = (MemorySecureStore(), AttestStubServer())
        try await Self.client(store, server, nil).signInAsGuest()  // an SDK without App Attest
        let attest = FakeAppAttest()
        let client = Self.client(store, server, attest)
        #expect(try await client.restore() != nil)
        await client.attestor?.backgroundFinished()
        #expect(server.attestations.map(\.keyId) == ["key-1"] && attest.keysMade == 1)
        #expect(try Self.storedKey(store) == AttestationFlow.Key(id: "key-1", attested: true))
        _ = try await Self.client(store, server, attest).restore()
        #expect(server.attestations.count == 1)
    }

    // MARK: Helpers

    private static func client(
        _ store: MemorySecureStore, _ server: AttestStubServer, _ attest: FakeAppAttest?, devices: FakeDeviceTokens? = nil,
        clock: ManualClock = ManualClock(), transport: (any HTTPTransport)? = nil
    ) -> Client {
        var configuration = ClientConfiguration(baseURL: URL(string: "http://127.0.0.1:9")!, secureStore: store)
        configuration.transport = transport ?? server
        configuration.clock = clock
        configuration.retry = .none
        configuration.metrics = ClientMetrics(exportLabel: nil)
        configuration.timeZone = nil
        configuration.attestation = attest.map { AttestationConfiguration(appAttest: $0, deviceCheck: devices) }
        return Client(configuration: configuration)
    }

    /// `task`'s value, or `CancellationError` once the test is cancelled (its time limit): a task that a regression leaves
    /// waiting for ever fails the test instead of hanging the run.
    private static func value<T: Sendable>(_ task: Task<T, any Error>) async throws -> T {
        try await valueUnlessCancelled(of: task)
    }

    /// Returns once `next` of the asserted requests waits its turn, or, should it not wait (the defect this guards
    /// against), once it was signed: a test then fails on what it sees instead of hanging.
    private static func queued(_ next: Int, _ attestor: Attestor, orAsserted counter: Int, _ log: AttestEventLog) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await attestor.waitForQueuedAssertions(next) }
            group.addTask { await log.waitFor(.asserted(counter)) }
            await group.next()
            group.cancelAll()
        }
    }

    private static func storedKey(_ store: MemorySecureStore) throws -> AttestationFlow.Key? {
        try store.read(AttestationFlow.keyItem).map { try JSONDecoder().decode(AttestationFlow.Key.self, from: $0) }
    }

    private static func header(_ request: TransportRequest?) throws -> AssertionHeader {
        let value = try #require(request?.headers[AssertionHeader.name], "no \(AssertionHeader.name) header")
        return try #require(AssertionHeader(value: value))
    }
}

/// An App Attest service that counts its calls, signs with made-up bytes, and fails as told.
final class FakeAppAttest: AppAttestService {
    private struct State {
        var keysMade = 0
        var attestCalls: [(keyId: String, hash: Data)] = []
        var assertCalls: [(keyId: String, hash: Data, assertion: Data)] = []
        var attestFailures: [AppAttestError] = []
        var assertFailures: [AppAttestError] = []
    }

    private let state = Mutex(State())
    let isSupported: Bool
    /// Where each assertion is logged, with its counter.
    private let log: AttestEventLog?

    init(supported: Bool = true, log: AttestEventLog? = nil) {
        isSupported = supported
        self.log = log
    }

    var keysMade: Int { state.withLock { $0.keysMade } }
    var attestCalls: [(keyId: String, hash: Data)] { state.withLock { $0.attestCalls } }
    var assertCalls: [(keyId: String, hash: Data, assertion: Data)] { state.withLock { $0.assertCalls } }

    /// The next calls of `attestKey` throw these, in order.
    func failAttestations(_ errors: [AppAttestError]) { state.withLock { $0.attestFailures += errors } }
    /// The next calls of `generateAssertion` throw these, in order.
    func failAssertions(_ errors: [AppAttestError]) { state.withLock { $0.assertFailures += errors } }

    func generateKey() async throws -> String {
        state.withLock { state in
            state.keysMade += 1
            return "key-\(state.keysMade)"
        }
    }

    func attestKey(_ keyId: String, clientDataHash: Data) async throws -> Data {
        try state.withLock { state in
            state.attestCalls.append((keyId, clientDataHash))
            if !state.attestFailures.isEmpty { throw state.attestFailures.removeFirst() }
        }
        return Data("attestation of \(keyId)".utf8)
    }

    func generateAssertion(_ keyId: String, clientDataHash: Data) async throws -> Data {
        try state.withLock { state in
            if !state.assertFailures.isEmpty { throw state.assertFailures.removeFirst() }
            // The counter the device keeps per key, raised by each assertion (here: the number of assertions made).
            let counter = state.assertCalls.count + 1
            let assertion = Data("assertion \(counter) by \(keyId)".utf8)
            state.assertCalls.append((keyId, clientDataHash, assertion))
            log?.append(.asserted(counter))
            return assertion
        }
    }
}

/// DeviceCheck's tokens: always `token`.
struct FakeDeviceTokens: DeviceTokenProvider {
    let token: Data
    var supported = true
    var isSupported: Bool { supported }
    func generateToken() async throws -> Data { token }
}

/// A scripted server for the attestation tests: challenges numbered from 1, guest and email sign-ins, attestations,
/// metered actions and daily generations answered; every request recorded.
final class AttestStubServer: HTTPTransport {
    enum Method: String { case get = "GET", post = "POST" }

    private struct State {
        var requests: [TransportRequest] = []
        var challenges = 0
        var tokens = 0
        var rejectAttestedGuestSignIns = 0
    }

    private let state = Mutex(State())

    /// How many guest sign-ins carrying an attestation are refused with `403 installation_rejected`.
    var rejectAttestedGuestSignIns: Int {
        get { state.withLock { $0.rejectAttestedGuestSignIns } }
        set { state.withLock { $0.rejectAttestedGuestSignIns = newValue } }
    }

    var requests: [TransportRequest] { state.withLock { $0.requests } }

    /// The requests to exactly `path` (its query aside).
    func requests(_ method: Method, _ path: String) -> [TransportRequest] {
        requests.filter { $0.method == method.rawValue && AttestationFlow.path(of: $0) == path }
    }

    /// The bodies of the guest sign-ins, in order.
    var guestSignIns: [GuestSignInRequest] { bodies(GuestSignInRequest.self, .post, "/v1/auth/guest") }

    /// The bodies of `POST /v1/auth/attestation`, in order.
    var attestations: [AppAttestation] { bodies(AppAttestation.self, .post, "/v1/auth/attestation") }

    private func bodies<Body: Decodable>(_ type: Body.Type, _ method: Method, _ path: String) -> [Body] {
        requests(method, path).compactMap { $0.body.flatMap { try? TallyJSON.decoder().decode(type, from: $0) } }
    }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let (number, reject) = state.withLock { state -> (Int, Bool) in
            state.requests.append(request)
            state.tokens += 1
            let attested = request.path == "/v1/auth/guest"
                && (request.body.flatMap { try? TallyJSON.decoder().decode(GuestSignInRequest.self, from: $0) })?.attestation != nil
            if attested, state.rejectAttestedGuestSignIns > 0 {
                state.rejectAttestedGuestSignIns -= 1
                return (state.tokens, true)
            }
            if request.path == "/v1/auth/attestation/challenge" { state.challenges += 1 }
            return (request.path == "/v1/auth/attestation/challenge" ? state.challenges : state.tokens, false)
        }
        let far = Date(timeIntervalSince1970: 4_000_000_000)
        switch (request.method, AttestationFlow.path(of: request)) {
        case ("POST", "/v1/auth/attestation/challenge"):
            return try Self.json(AttestationChallenge(challenge: "challenge-\(number)", expiresAt: far))
        case ("POST", "/v1/auth/guest"):
            if reject { return Self.error(403, .installationRejected) }
            return try Self.tokens("guest", isGuest: true, number)
        case ("POST", "/v1/auth/sign-in"):
            return try Self.tokens("ada", isGuest: false, number)
        case ("POST", "/v1/auth/attestation"):
            let body = try TallyJSON.decoder().decode(AppAttestation.self, from: request.body ?? Data())
            return try Self.json(AttestationStatus(keyId: body.keyId, environment: "development"))
        case ("GET", "/v1/actions"):
            return try Self.json(ActionList(items: []))
        case ("POST", let path) where path.hasPrefix("/v1/actions/"):
            let wallet = Wallet(balance: 0, held: 0, version: Int64(number))
            let name = String(path.dropFirst("/v1/actions/".count))
            return try Self.json(ActionResult(action: name, paidWith: .quota, tokensCharged: 0, wallet: wallet, quotas: []))
        case ("GET", let path) where path.hasPrefix("/v1/ai/daily/"):
            let name = String(path.dropFirst("/v1/ai/daily/".count))
            return try Self.json(DailyGeneration(name: name, day: "2027-01-15", content: "stars", generatedAt: far, expiresAt: far))
        default:
            return Self.error(404, .notFound)
        }
    }

    private static func tokens(_ userId: String, isGuest: Bool, _ number: Int) throws -> TransportResponse {
        try json(SessionTokens(userId: userId, isGuest: isGuest, accessToken: "a\(number)", refreshToken: "r\(number)", expiresIn: 900))
    }

    private static func json(_ value: some Encodable) throws -> TransportResponse {
        TransportResponse(status: 200, headers: ["Content-Type": "application/json"], body: try TallyJSON.encoder().encode(value))
    }

    private static func error(_ status: Int, _ code: ErrorCode) -> TransportResponse {
        let body = ErrorResponse(error: ErrorDetail(code: code, message: "stub \(status)"))
        let data = (try? TallyJSON.encoder().encode(body)) ?? Data()
        return TransportResponse(status: status, headers: ["Content-Type": "application/json"], body: data)
    }
}

/// What happened, in order, around asserted requests: assertions made, requests sent and answers received, each with
/// its assertion's counter (nil for a request without one).
enum AttestEvent: Hashable, Sendable {
    case asserted(Int)
    case sent(String, Int?)
    case answered(String, Int?)

    var counter: Int? {
        switch self {
        case .asserted(let counter): counter
        case .sent(_, let counter), .answered(_, let counter): counter
        }
    }
}

final class AttestEventLog: Sendable {
    private struct State {
        var events: [AttestEvent] = []
        var watchers: [(id: Int, event: AttestEvent, continuation: CheckedContinuation<Void, Never>)] = []
        var lastId = 0
    }

    private let state = Mutex(State())

    var events: [AttestEvent] { state.withLock { $0.events } }

    func append(_ event: AttestEvent) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.events.append(event)
            let ready = state.watchers.filter { $0.event == event }.map(\.continuation)
            state.watchers.removeAll { $0.event == event }
            return ready
        }
        for watcher in ready { watcher.resume() }
    }

    /// Returns once `event` happened, or the calling task is cancelled.
    func waitFor(_ event: AttestEvent) async {
        let id = state.withLock { state -> Int in
            state.lastId += 1
            return state.lastId
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state -> Bool in
                    if state.events.contains(event) || Task.isCancelled { return true }
                    state.watchers.append((id, event, continuation))
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            let watcher = state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard let index = state.watchers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.watchers.remove(at: index).continuation
            }
            watcher?.resume()
        }
    }
}

/// The stub server behind a network that holds the requests the test names in flight until it releases them (a
/// cancelled one fails as a lost connection), logging each request sent and each answer with its assertion's counter.
final class HoldingTransport: HTTPTransport {
    private struct State {
        /// How many of the next requests to each path are held.
        var holds: [String: Int] = [:]
        var held: [(path: String, id: Int, continuation: CheckedContinuation<Void, any Error>)] = []
        var watchers: [(path: String, id: Int, continuation: CheckedContinuation<Void, Never>)] = []
        var lastId = 0
    }

    private let server: AttestStubServer
    private let log: AttestEventLog
    private let state = Mutex(State())

    init(_ server: AttestStubServer, log: AttestEventLog) {
        self.server = server
        self.log = log
    }

    /// The next request to `path` (its query aside) is held until ``release(_:)``.
    func hold(_ path: String) { state.withLock { $0.holds[path, default: 0] += 1 } }

    /// How many requests are held now.
    var heldCount: Int { state.withLock { $0.held.count } }

    /// Returns once a request to `path` is held, or the calling task is cancelled.
    func waitUntilHeld(_ path: String) async {
        let id = state.withLock { state -> Int in
            state.lastId += 1
            return state.lastId
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let held = state.withLock { state -> Bool in
                    if state.held.contains(where: { $0.path == path }) || Task.isCancelled { return true }
                    state.watchers.append((path, id, continuation))
                    return false
                }
                if held { continuation.resume() }
            }
        } onCancel: {
            let watcher = state.withLock { state -> CheckedContinuation<Void, Never>? in
                guard let index = state.watchers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.watchers.remove(at: index).continuation
            }
            watcher?.resume()
        }
    }

    /// Lets the first held request to `path` go on to the server.
    func release(_ path: String) {
        let held = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard let index = state.held.firstIndex(where: { $0.path == path }) else { return nil }
            return state.held.remove(at: index).continuation
        }
        held?.resume()
    }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let path = AttestationFlow.path(of: request)
        let counter = Self.counter(request)
        log.append(.sent(path, counter))
        let id = state.withLock { state -> Int? in
            guard state.holds[path, default: 0] > 0 else { return nil }
            state.holds[path]! -= 1
            state.lastId += 1
            return state.lastId
        }
        if let id {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    let (cancelled, watchers) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
                        if Task.isCancelled { return (true, []) }
                        state.held.append((path, id, continuation))
                        let watchers = state.watchers.filter { $0.path == path }.map(\.continuation)
                        state.watchers.removeAll { $0.path == path }
                        return (false, watchers)
                    }
                    for watcher in watchers { watcher.resume() }
                    if cancelled { continuation.resume(throwing: TransportError.connectionLost) }
                }
            } onCancel: {
                let held = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                    guard let index = state.held.firstIndex(where: { $0.id == id }) else { return nil }
                    return state.held.remove(at: index).continuation
                }
                held?.resume(throwing: TransportError.connectionLost)
            }
        }
        let response = try await server.send(request)
        log.append(.answered(path, counter))
        return response
    }

    /// The counter of `request`'s assertion, as ``FakeAppAttest`` wrote it ("assertion N by key"); nil without one.
    static func counter(_ request: TransportRequest?) -> Int? {
        guard let value = request?.headers[AssertionHeader.name], let header = AssertionHeader(value: value),
            let assertion = Data(base64Encoded: header.assertion)
        else { return nil }
        return String(decoding: assertion, as: UTF8.self).split(separator: " ").dropFirst().first.flatMap { Int($0) }
    }
}
