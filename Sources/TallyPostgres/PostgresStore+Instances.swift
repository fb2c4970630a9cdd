import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
import TallyAPI
import TallyStore

/// The server processes running on this database (`server_instances`), so that a process whose keys do not
/// agree with theirs (``KeyAgreement``) refuses to start. Each running process refreshes its row every
/// ``PostgresStore/instanceHeartbeat`` (``InstanceHeartbeat``); a row not refreshed for
/// ``PostgresStore/instanceStaleness`` no longer counts (a crashed process), and a process that stops
/// gracefully deletes its own. Times are the store's clock's, so the machines' clocks must agree to within a
/// few seconds (as NTP keeps them).
extension PostgresStore {
    /// How long a process that stopped refreshing its row still counts as running.
    public static let instanceStaleness: TimeInterval = 30
    /// How often a running process refreshes its row.
    public static let instanceHeartbeat: TimeInterval = 5

    /// Registers `instance` (its `seenAt` set to now on the store's clock) unless `admit` refuses the processes
    /// running now, whose rows it is given; `admit`'s error is thrown as is. One transaction under an advisory
    /// lock: of two processes starting at once, the second sees the first. Rows gone stale are deleted.
    public func join(_ instance: ServerInstance, admit: @Sendable ([ServerInstance]) throws -> Void) async throws {
        let now = clock.now.millis
        let staleBefore = now - Int64(saturating: Self.instanceStaleness * 1000)
        try await transaction { connection in
            try await connection.rows("SELECT pg_advisory_xact_lock(hashtextextended('tally:server_instances', 0))", logger: logger)
            var stale = BoundStatement()
            try await run(Writes.deleteStaleInstances(staleBefore: stale.bind(staleBefore)), stale, changing: [.all], on: connection)
            let running = try await connection.rows(
                "SELECT id, host, pid, signing_keys, admin_key, started_at, seen_at FROM server_instances ORDER BY started_at",
                logger: logger
            ).map { try ServerInstance(Columns($0)) }
            do { try admit(running) } catch { throw CallerError(error: error) }
            var statement = BoundStatement()
            let write = Self.storeInstance(instance, seenAt: now, heartbeat: false, into: &statement)
            try await run(write, statement, changing: [.all], on: connection)
        }
    }

    /// Marks `instance` seen now; puts its row back if another process deleted it as stale meanwhile (this one
    /// could not reach the database for longer than ``instanceStaleness``).
    public func heartbeat(_ instance: ServerInstance) async throws {
        var statement = BoundStatement()
        try await run(Self.storeInstance(instance, seenAt: clock.now.millis, heartbeat: true, into: &statement), statement, changing: [.all])
    }

    /// ``Writes/storeInstance(id:host:pid:signingKeys:adminKey:startedAt:seenAt:heartbeat:)`` of `instance`, its values
    /// bound in `statement`.
    private static func storeInstance(
        _ instance: ServerInstance, seenAt: Int64, heartbeat: Bool, into statement: inout BoundStatement
    ) -> PostgresWrite {
        Writes.storeInstance(
            id: statement.bind(instance.id), host: statement.bind(instance.host), pid: statement.bind(Int64(instance.pid)),
            signingKeys: statement.bind(instance.signingKeys), adminKey: statement.bind(instance.adminKey),
            startedAt: statement.bind(instance.startedAt.millis), seenAt: statement.bind(seenAt), heartbeat: heartbeat)
    }

    /// Deletes the row of the instance `id` (it stops).
    public func leave(id: String) async throws {
        var statement = BoundStatement()
        try await run(Writes.leave(id: statement.bind(id)), statement, changing: [.all])
    }

    /// The rows of the processes counted as running now.
    public func runningInstances() async throws -> [ServerInstance] {
        let staleBefore = clock.now.millis - Int64(saturating: Self.instanceStaleness * 1000)
        return try await rows(
            """
            SELECT id, host, pid, signing_keys, admin_key, started_at, seen_at FROM server_instances
            WHERE seen_at > \(staleBefore) ORDER BY started_at
            """
        ).map { try ServerInstance(Columns($0)) }
    }
}

extension ServerInstance {
    /// `id, host, pid, signing_keys, admin_key, started_at, seen_at` of `server_instances`.
    init(_ row: Columns) throws {
        self.init(
            id: try row["id"], host: try row["host"], pid: Int(try row["pid"] as Int64), signingKeys: try row["signing_keys"],
            adminKey: try row["admin_key"], startedAt: Date(millis: try row["started_at"]), seenAt: Date(millis: try row["seen_at"]))
    }
}

/// Keeps this process's `server_instances` row fresh while the server runs (every
/// ``PostgresStore/instanceHeartbeat`` on the store's clock), and deletes it when the server stops, so that a
/// restart with other keys need not wait for it to go stale. Put it after the store in the service group:
/// it stops first, while the pool still runs.
public struct InstanceHeartbeat: Service {
    let store: PostgresStore
    /// The row, once the process joined (``PostgresStore/join(_:admit:)``); nothing to refresh before.
    let instance: @Sendable () -> ServerInstance?

    /// Refreshes `instance`'s row in `store`.
    public init(store: PostgresStore, instance: @escaping @Sendable () -> ServerInstance?) {
        self.store = store
        self.instance = instance
    }

    /// Refreshes the row until the service group stops, then deletes it (cancelled instead, as a process torn
    /// down, it leaves the row to go stale). A failed refresh (the database down) is tried again at the next beat.
    public func run() async {
        var failures = 0
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            try? await cancelWhenGracefulShutdown { try await store.clock.sleep(for: PostgresStore.instanceHeartbeat) }
            guard !Task.isCancelled && !Task.isShuttingDownGracefully, let instance = instance() else { continue }
            do {
                try await store.heartbeat(instance)
                failures = 0
            } catch {
                failures += 1
                if failures == 3 {
                    store.logger.warning("postgres: this instance's heartbeat keeps failing", metadata: ["error": "\(error)"])
                }
            }
        }
        if Task.isShuttingDownGracefully, !Task.isCancelled, let instance = instance() { try? await store.leave(id: instance.id) }
    }
}
