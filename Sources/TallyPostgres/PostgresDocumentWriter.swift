import Foundation
import Logging
import PostgresNIO
import TallyAPI
import TallyStore

/// Where a document lives, for one user: its collection and id.
struct DocumentAddress: Hashable {
    var collection: String
    var id: String

    init(_ mutation: DocumentMutation) { (collection, id) = (mutation.collection.name, mutation.docId) }
    init(_ record: DocumentRecord) { (collection, id) = (record.collection, record.id) }
}

/// A user's document writes in one transaction (``PostgresStore/writeDocument(_:userId:idempotency:now:render:)``,
/// ``PostgresStore/push(userId:clientId:mutations:now:)``), in four steps:
/// - **lock** (``open(_:userId:clientId:reading:now:on:)``): the user's `sync_state` row, created on the first
///   write; every writer of the user, in any process, queues here, so each plans from the documents and the
///   version the previous one committed, and versions commit in order;
/// - **read**, one statement after the lock: the user's version and what their documents take of their
///   ``SyncBudget``, the sync client (claimed for the user when new, within the budget's client ids), every
///   document the mutations address, and the live documents of each collection a put may create a document in;
/// - **take** each mutation (``take(_:)``), in the steps of ``DocumentTaking``: planned from the documents as this
///   transaction left them (a create the read did not count for counts its collection then, once), within
///   the budget; a create in a metered collection performs the collection's action first, on the ledger's locking
///   path (the wallet locked after the sync state, as everywhere), and nothing is kept of a mutation it refuses;
/// - **finish** (``finish(lastMutationId:)``): one statement writes every document's final state, the user's
///   new version and usage, and the client's last mutation id.
///
/// Why this differs from SQLite's writer (many processes here, one writer there): `TallyStore/DocumentTaking.swift`.
struct DocumentWriter {
    let store: PostgresStore
    let connection: PooledConnection
    let userId: String
    let now: Date
    /// The user's version before this transaction.
    private let base: Int64
    /// The rules of the call's writes, and the version and counts they moved.
    private var taking: DocumentTaking
    /// The documents read (a tombstone included; `nil`: never written), as the mutations taken left them.
    private var documents: [DocumentAddress: DocumentRecord]
    /// The documents to write, by address (the last state of each).
    private var written: [DocumentAddress: DocumentRecord] = [:]
    /// The sync client: its id and last mutation id as read.
    private let client: (id: String, lastMutationId: Int64)?
    /// The account as the last charge left it (read once, after the wallet's row lock).
    private var account: LockedAccount?
    /// Ledger entry ids taken for the charges to come, in ascending order.
    private var entryIds: [Int64] = []
    /// The account after the last charge, if a mutation charged it.
    private(set) var charged: AccountState?

    /// Locks the user's sync state and reads what `mutations` plan from. With a `clientId`,
    /// claims it for the user if it is new; another user's throws `.clientIdInUse`, one more than
    /// `budget.clientIds` throws `.storageFull`. Throws `.userNotFound`.
    static func open(
        _ store: PostgresStore, userId: String, clientId: String?, reading mutations: [DocumentMutation], budget: SyncBudget,
        now: Date, on connection: PooledConnection
    ) async throws -> DocumentWriter {
        do {
            _ = try await connection.execute(SyncStateLockStatement(userId: userId), logger: store.logger)
            store.note(Writes.lockSyncState, [ChangedRows.user(userId)], on: connection)
        } catch let error as PSQLError where error.serverInfo?[.constraintName] == "sync_state_user_id_fkey" {
            // The account was deleted while this statement ran.
            throw StoreError(.userNotFound)
        }
        var unique = Set<DocumentAddress>()
        let addresses = mutations.map(DocumentAddress.init).filter { unique.insert($0).inserted }
        var puts = Set<DocumentAddress>()
        for mutation in mutations { if case .put = mutation.operation { puts.insert(DocumentAddress(mutation)) } }
        let rows = try await connection.execute(
            DocumentWriterReadStatement(
                userId: userId, clientId: clientId, now: now, clientIds: budget.clientIds, addresses: addresses, puts: Array(puts)),
            logger: store.logger)
        store.note(Writes.documentWriterRead, [ChangedRows.user(userId)], on: connection)
        var version: Int64?
        var usage = SyncUsage()
        var owner: (userId: String, lastMutationId: Int64)?
        var documents: [DocumentAddress: DocumentRecord] = [:]
        var counts: [String: Int] = [:]
        for row in rows.map(Columns.init) {
            switch try row["part"] as String {
            case "document":
                let record = try DocumentRecord(row)
                documents[DocumentAddress(record)] = record
                continue
            case "count":
                counts[try row["collection"]] = Int(try row["version"] as Int64)
                continue
            default: break
            }
            version = try row["user_version"]
            usage = SyncUsage(documents: try row["stored_documents"], bytes: try row["stored_bytes"])
            if let user: String = try row["client_user_id"] { owner = (user, try row["client_last_mutation_id"]) }
        }
        // No sync state: the account does not exist (or was deleted since the lock statement's snapshot), or it is a
        // guest merged into an account (its documents are the account's now; the merge held this lock).
        guard let version else { throw StoreError(.userNotFound) }
        var client: (id: String, lastMutationId: Int64)?
        if let clientId {
            // No row: the user has all the client ids the budget allows, or another user's push claimed the id
            // after this statement's snapshot was taken.
            guard let owner else {
                let owned = try await connection.rows(
                    "SELECT count(*) AS clients FROM sync_clients WHERE user_id = \(userId)", logger: store.logger)
                if try PostgresStore.single(owned, "a count")["clients"] as Int64 >= Int64(budget.clientIds) {
                    throw StoreError(.storageFull)
                }
                throw RetryTransaction()
            }
            guard owner.userId == userId else { throw StoreError(.clientIdInUse) }
            client = (clientId, owner.lastMutationId)
        }
        return DocumentWriter(store: store, connection: connection, userId: userId, budget: budget, now: now, base: version,
            usage: usage, client: client, documents: documents, counts: counts)
    }

    private init(
        store: PostgresStore, connection: PooledConnection, userId: String, budget: SyncBudget, now: Date, base: Int64,
        usage: SyncUsage, client: (id: String, lastMutationId: Int64)?, documents: [DocumentAddress: DocumentRecord],
        counts: [String: Int]
    ) {
        self.store = store
        self.connection = connection
        self.userId = userId
        self.now = now
        self.base = base
        self.taking = DocumentTaking(version: base, usage: usage, budget: budget, now: now)
        for (collection, live) in counts { taking.counted(collection, live, includesWritesTaken: false) }
        self.client = client
        self.documents = documents
    }

    /// The sync client's last mutation id as read (0 without a client).
    var lastMutationId: Int64 { client?.lastMutationId ?? 0 }

    /// Takes `mutation` (``DocumentTaking``) from the documents as this transaction left them: planned, the
    /// collection's action performed for a create, and given the user's next version.
    mutating func take(_ mutation: DocumentMutation) async throws -> TakenMutation {
        let address = DocumentAddress(mutation)
        let existing = documents[address]
        let collection = mutation.collection.name
        if taking.needsCount(mutation, existing: existing) {
            // The records are written by ``finish(lastMutationId:)``: the count is the stored one.
            taking.counted(collection, try await storedCount(collection), includesWritesTaken: false)
        }
        let write: DocumentTaking.Write
        switch taking.plan(mutation, existing: existing) {
        case .answered(let taken): return taken
        case .write(let planned): write = planned
        }
        if let command = write.charge(userId: userId) {
            do {
                try await charge(command)
            } catch {
                guard let refused = TakenMutation.chargeFailed(error) else { throw error }
                return refused
            }
        }
        let record = taking.take(write)
        documents[address] = record
        written[address] = record
        return .applied(record, created: write.creates)
    }

    /// The collection's live documents as stored.
    private func storedCount(_ collection: String) async throws -> Int {
        let rows = try await connection.execute(LiveDocumentCountStatement(userId: userId, collection: collection), logger: store.logger)
        return Int(try PostgresStore.single(rows, "a count")["live"] as Int64)
    }

    /// Performs `command` on the ledger's locking path in this transaction: the wallet locked (after the sync
    /// state) and the account read once, each charge planned from the account as the previous one left it
    /// and applied; a refusal throws with the state and writes nothing. Entry ids are taken
    /// ``entryIdsPerRead`` at a time. The charges' writes are declared (``PostgresStore/apply(_:to:remembering:now:on:)``),
    /// so this process's compare-and-set cache forgets the account when the transaction commits.
    private mutating func charge(_ command: Command) async throws {
        var account: LockedAccount
        if let known = self.account {
            account = known
        } else {
            guard try await store.lockWallet(userId: userId, on: connection) else { throw StoreError(.userNotFound) }
            account = try await store.lockedAccount(for: command, now: now, on: connection)
        }
        if command.mayAppend, account.entryId == nil {
            if entryIds.isEmpty { entryIds = try await store.nextEntryIds(Self.entryIdsPerRead, on: connection) }
            account.entryId = entryIds.removeFirst()
        }
        self.account = account
        let planned = try await store.planLocked(command, from: account, now: now, on: connection)
        try await store.apply(planned.plan, to: planned.account, remembering: nil, now: now, on: connection)
        self.account = planned.applied
        charged = planned.outcome.state
    }

    /// How many entry ids a push's charges take from the sequence at once (those left unused are skipped ids).
    static let entryIdsPerRead = 32

    /// Writes every document taken, the user's new version and, with a client, its last mutation id, in one
    /// statement; nothing when nothing changed.
    func finish(lastMutationId: Int64 = 0) async throws {
        let clientMoved = client.map { lastMutationId > $0.lastMutationId } ?? false
        guard !written.isEmpty || clientMoved else { return }
        let records = written.values.sorted { $0.version < $1.version }
        let rows = try await connection.execute(
            DocumentWriterFinishStatement(
                userId: userId, now: now, records: records, version: taking.version, usage: taking.usage, base: base,
                clientId: client?.id, lastMutationId: lastMutationId, clientMoved: clientMoved),
            logger: store.logger)
        store.note(Writes.documentWriterFinish, [ChangedRows.user(userId)], on: connection)
        // Under the sync state's lock nothing else writes these rows; if something did, start over.
        guard let row = rows.first.map(Columns.init) else { throw RetryTransaction() }
        let counts: (Int64, Int64, Int64) = (try row["written"], try row["counted"], try row["client"])
        guard counts == (Int64(records.count), 1, clientMoved ? 1 : 0) else { throw RetryTransaction() }
    }
}
