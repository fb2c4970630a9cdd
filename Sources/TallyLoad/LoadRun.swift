import Foundation
import Histogram
import NIOCore
import NIOHTTP1
import NIOPosix
import TallyAPI

/// A fault to inject during the measured phase, e.g. killing and restarting a server process.
public struct ScheduledFault: Sendable {
    /// When, from the start of the measured phase.
    public var at: Duration
    /// What it is, for the report.
    public var name: String
    /// Does it.
    public var perform: @Sendable () async throws -> Void

    /// Creates a fault.
    public init(at: Duration, name: String, perform: @escaping @Sendable () async throws -> Void) {
        self.at = at
        self.name = name
        self.perform = perform
    }
}

/// Runs one load test: connects and signs in every user, drives the measured phase, then checks every
/// account's books against the server. See ``LoadReport`` for what comes out.
public struct LoadRun: Sendable {
    /// The options.
    public var options: LoadOptions
    /// Faults injected during the measured phase.
    public var faults: [ScheduledFault] = []
    /// Processes whose CPU and memory the report shows (the servers; the load tool is added).
    public var sampled: @Sendable () -> [(name: String, pid: Int32)] = { [] }
    /// Progress lines (stderr in the CLI).
    public var log: @Sendable (String) -> Void = { _ in }

    /// A run with `options`.
    public init(options: LoadOptions) { self.options = options }

    /// Closed before the run's event loops shut down: an SDK user's refresh may outlive the run.
    private let gate = ConnectGate()

    /// Runs it. Throws only when the servers cannot be reached at all; everything else is in the report.
    public func run() async throws -> LoadReport {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            let report = try await run(on: group)
            gate.close()
            try? await group.shutdownGracefully()
            return report
        } catch {
            gate.close()
            try? await group.shutdownGracefully()
            throw error
        }
    }

    private func run(on group: MultiThreadedEventLoopGroup) async throws -> LoadReport {
        let setupStart = ContinuousClock.now
        let recorder = LatencyRecorder()
        guard options.adminServers.count == options.servers.count else {
            throw LoadError("every server needs its admin listener's URL (\(options.servers.count) servers, \(options.adminServers.count) admin URLs)")
        }
        let admins = options.adminServers.map {
            AdminPool(
                url: $0, size: options.adminConnections, group: group, recorder: recorder, timeout: options.requestTimeout,
                deadline: options.settleDeadline)
        }
        let actions = try await discover(group: group, admin: admins[0], recorder: recorder)
        log("price list: quota action \(actions.quotaAction), token action \(actions.tokenAction)")

        var agents = makeAgents(actions: actions, admins: admins, group: group, recorder: recorder)
        log("connecting and signing in \(agents.count) users (\(options.sdkUsers) through the SDK)")
        let ready = await setUp(&agents)
        let setupSeconds = ProcessSampler.seconds(.now - setupStart)
        log("\(ready) of \(agents.count) users ready in \(String(format: "%.1f", setupSeconds)) s; measured phase: \(options.mode), \(options.duration)")

        let cpuAtStart = CPUReading.now(servers: sampled())
        let start = ContinuousClock.now
        recorder.startMeasuring(at: start)
        let sampler = ProcessSampler { [sampled] in sampled() + [("load tool", getpid())] }
        let sampling = Task { await sampler.run(from: start) }
        let faultTask = Task { [faults, log] in
            for fault in faults.sorted(by: { $0.at < $1.at }) {
                try? await Task.sleep(until: start + fault.at)
                log("fault: \(fault.name)")
                do { try await fault.perform() } catch { log("fault \(fault.name) failed: \(error)") }
            }
        }
        let finished = await drive(agents, from: start)
        let end = ContinuousClock.now
        let cpuAtEnd = CPUReading.now(servers: sampled())
        recorder.stopMeasuring()
        faultTask.cancel()
        sampling.cancel()
        let samples = await sampling.value
        log("measured phase done; checking the books of \(finished.count) users")

        let books = await check(finished, prices: actions.prices, recorder: recorder)
        for admin in admins { await admin.close() }
        let operations = recorder.operations.values.reduce(0) { $0 + Int($1.histogram.totalCount) }
        return LoadReport(
            options: options, actions: actions, setupSeconds: setupSeconds, usersReady: ready,
            measuredSeconds: ProcessSampler.seconds(end - start), operations: recorder.operations, timeline: recorder.seconds,
            setup: recorder.unmeasured, samples: samples, sdk: finished.compactMap(\.readCounts).reduce(SDKReadCounts(), +),
            books: books, faults: faults.map(\.name), cost: OperationCost(operations: operations, start: cpuAtStart, end: cpuAtEnd))
    }

    // MARK: - Phases

    private func discover(group: any EventLoopGroup, admin: AdminPool, recorder: LatencyRecorder) async throws -> ScenarioActions {
        let (host, port) = try Self.address(options.servers[0])
        let connection = LoadConnection(host: host, port: port, group: group)
        let caller = APICaller(connection: connection, recorder: recorder, timeout: .seconds(10), deadline: .seconds(60))
        let result: Result<ScenarioActions, any Error>
        do { result = .success(try await discover(caller, admin: admin)) } catch { result = .failure(error) }
        await connection.close()
        return try result.get()
    }

    private func discover(_ caller: APICaller, admin: AdminPool) async throws -> ScenarioActions {
        guard let response = await caller.send(LoadRequest(.GET, "/v1/actions"), operation: "setup.actions"),
            let list = APICaller.decode(ActionList.self, response)
        else { throw LoadError("cannot read the price list from \(options.servers[0])") }
        guard let quota = list.items.first(where: { $0.quota != nil && $0.tokens != nil }),
            let token = list.items.first(where: { $0.quota == nil && $0.tokens != nil })
        else { throw LoadError("the server's configuration needs an action with a quota and tokens, and one with tokens only") }
        // The daily limit is only in a user's quota list: ask as a throwaway guest.
        let probe = RawUser(index: -1, seed: options.seed, caller: caller, admin: admin, adminKey: options.adminKey, actions: ScenarioActions(quotaAction: "", tokenAction: "", prices: PriceList(tokens: [:], quota: [:], dailyLimit: [:])))
        guard await probe.signIn(operation: "setup.probe", scheduled: .now),
            let quotas = await probe.call("setup.probe", LoadRequest(.GET, "/v1/quotas"), expected: [200], scheduled: .now),
            let decoded = APICaller.decode(QuotaList.self, quotas)
        else { throw LoadError("cannot read the quota list from \(options.servers[0])") }
        let prices = PriceList(
            tokens: Dictionary(uniqueKeysWithValues: list.items.compactMap { item in item.tokens.map { (item.name, $0) } }),
            quota: Dictionary(uniqueKeysWithValues: list.items.compactMap { item in item.quota.map { (item.name, $0) } }),
            dailyLimit: Dictionary(uniqueKeysWithValues: decoded.items.map { ($0.name, $0.limit) }))
        return ScenarioActions(quotaAction: quota.name, tokenAction: token.name, prices: prices)
    }

    private func makeAgents(actions: ScenarioActions, admins: [AdminPool], group: any EventLoopGroup, recorder: LatencyRecorder) -> [Agent] {
        let sdkEvery = options.sdkUsers > 0 ? max(1, options.users / options.sdkUsers) : Int.max
        var sdkCount = 0
        // Sync users are spread like SDK users, offset so that the two kinds do not collide.
        let syncEvery = options.syncUsers > 0 ? max(1, options.users / options.syncUsers) : Int.max
        var syncCount = 0
        return (0..<options.users).map { index in
            let server = options.servers[index % options.servers.count]
            let admin = admins[index % admins.count]
            let (host, port) = (try? Self.address(server)) ?? ("127.0.0.1", 0)
            let connection = LoadConnection(host: host, port: port, group: group)
            let caller = APICaller(connection: connection, recorder: recorder, timeout: options.requestTimeout, deadline: options.settleDeadline)
            let raw = RawUser(index: index, seed: options.seed, caller: caller, admin: admin, adminKey: options.adminKey, actions: actions)
            if index % sdkEvery == 0, sdkCount < options.sdkUsers {
                sdkCount += 1
                let transport = SDKTransport(host: host, port: port, group: group, gate: gate)
                return Agent(sdk: SDKUser(admin: raw, transport: transport, baseURL: server, recorder: recorder), mix: options.mix.sdk)
            }
            if (index + syncEvery / 2) % syncEvery == 0, syncCount < options.syncUsers {
                syncCount += 1
                return Agent(sync: SyncUser(raw: raw, group: group), mix: options.mix.sync)
            }
            return Agent(raw: raw, mix: options.mix.raw)
        }
    }

    /// Connects and signs in every agent, `setupConcurrency` at a time; returns how many are ready.
    private func setUp(_ agents: inout [Agent]) async -> Int {
        let grant = options.initialGrant
        var ready = 0
        await withTaskGroup(of: Bool.self) { group in
            var next = 0
            for agent in agents.prefix(options.setupConcurrency) {
                next += 1
                group.addTask { await agent.setUp(initialGrant: grant) }
            }
            for await ok in group {
                if ok { ready += 1 }
                if next < agents.count {
                    let agent = agents[next]
                    next += 1
                    group.addTask { await agent.setUp(initialGrant: grant) }
                }
            }
        }
        agents.removeAll { !$0.isReady }
        return ready
    }

    /// The measured phase; returns the agents when every queued operation has finished.
    private func drive(_ agents: [Agent], from start: ContinuousClock.Instant) async -> [Agent] {
        let duration = options.duration
        switch options.mode {
        case .open(let perSecond):
            let schedule = ArrivalSchedule(perSecond: perSecond)
            let total = schedule.due(at: duration) - 1
            var streams: [AsyncStream<Arrival>.Continuation] = []
            var inboxes: [AsyncStream<Arrival>] = []
            for _ in agents {
                let (stream, continuation) = AsyncStream.makeStream(of: Arrival.self)
                streams.append(continuation)
                inboxes.append(stream)
            }
            let seed = options.seed
            let kinds = agents.map(\.mix)
            return await withTaskGroup(of: Agent?.self) { group in
                for (agent, inbox) in zip(agents, inboxes) {
                    group.addTask {
                        for await arrival in inbox { await agent.run(arrival.kind, scheduled: arrival.scheduled) }
                        return agent
                    }
                }
                group.addTask { [streams] in
                    var rng = SplitMix(seed: seed ^ 0x5EED)
                    var emitted = 0
                    while emitted < total {
                        let due = min(total, schedule.due(at: .now - start))
                        while emitted < due {
                            let user = Int(rng.next() % UInt64(streams.count))
                            let kind = OperationMix.pick(rng.unit(), from: kinds[user])
                            streams[user].yield(Arrival(kind: kind, scheduled: start + schedule.start(of: emitted)))
                            emitted += 1
                        }
                        try? await Task.sleep(until: start + schedule.start(of: emitted), tolerance: .microseconds(200))
                    }
                    for stream in streams { stream.finish() }
                    return nil
                }
                return await group.reduce(into: []) { if let agent = $1 { $0.append(agent) } }
            }
        case .closed(let workers):
            let count = max(1, min(workers, agents.count))
            let seed = options.seed
            return await withTaskGroup(of: [Agent].self) { group in
                for worker in 0..<count {
                    let mine = Swift.stride(from: worker, to: agents.count, by: count).map { agents[$0] }
                    group.addTask {
                        var rng = SplitMix(seed: seed ^ UInt64(worker))
                        var turn = 0
                        while ContinuousClock.now < start + duration {
                            let agent = mine[turn % mine.count]
                            turn += 1
                            await agent.run(OperationMix.pick(rng.unit(), from: agent.mix), scheduled: .now)
                        }
                        return mine
                    }
                }
                return await group.reduce(into: []) { $0 += $1 }
            }
        }
    }

    /// Fetches every account's books, 64 at a time, and checks them.
    private func check(_ agents: [Agent], prices: PriceList, recorder: LatencyRecorder) async -> BooksResult {
        var result = BooksResult()
        await withTaskGroup(of: (ExpectedBooks, [Violation]?).self) { group in
            var next = 0
            func add() {
                let agent = agents[next]
                next += 1
                group.addTask {
                    let expectation = agent.expectation
                    guard let books = await agent.books() else { return (expectation, nil) }
                    return (expectation, BooksChecker.check(expectation, against: books, prices: prices))
                }
            }
            for _ in 0..<min(64, agents.count) { add() }
            for await (expectation, violations) in group {
                result.add(expectation, violations: violations)
                if next < agents.count { add() }
            }
        }
        result.sync = await checkSync(agents.compactMap(\.sync))
        for agent in agents { await agent.close() }
        return result
    }

    /// Pushes what every sync user's outbox still holds, then checks each user's documents, 64 at a time.
    private func checkSync(_ users: [SyncUser]) async -> SyncBooksResult {
        var result = SyncBooksResult()
        guard !users.isEmpty else { return result }
        await withTaskGroup(of: (SyncUser, Bool, SyncServerState?).self) { group in
            var next = 0
            func add() {
                let user = users[next]
                next += 1
                group.addTask {
                    let settled = await user.settle()
                    return (user, settled, await user.serverState())
                }
            }
            for _ in 0..<min(64, users.count) { add() }
            for await (user, settled, state) in group {
                result.add(user, settled: settled, violations: state.map { SyncBooksChecker.check(user.expectation, against: $0) })
                if next < users.count { add() }
            }
        }
        return result
    }

    static func address(_ url: URL) throws -> (String, Int) {
        guard let host = url.host, let port = url.port else { throw LoadError("server URL \(url) needs a host and a port") }
        return (host, port)
    }
}

/// An operation due for one user.
struct Arrival: Sendable {
    let kind: OperationKind
    let scheduled: ContinuousClock.Instant
}

/// A load-test failure that is not a finding (bad options, unreachable server).
public struct LoadError: Error, CustomStringConvertible {
    /// What went wrong.
    public var description: String
    init(_ description: String) { self.description = description }
}
