import Foundation

/// A running `tally serve` process as the others sharing its database see it: where it runs, and keyed
/// fingerprints of its keys (never the keys themselves).
public struct ServerInstance: Sendable, Equatable {
    /// A random id, new at every start.
    public var id: String
    /// The machine's host name.
    public var host: String
    /// The process id on that machine.
    public var pid: Int
    /// Fingerprints of the token signing keys (`TALLY_SIGNING_KEY`), the one it signs with first.
    public var signingKeys: [String]
    /// Fingerprint of the admin key (`TALLY_ADMIN_KEY`).
    public var adminKey: String
    /// When it started.
    public var startedAt: Date
    /// When it last said it runs.
    public var seenAt: Date

    /// An instance.
    public init(id: String, host: String, pid: Int, signingKeys: [String], adminKey: String, startedAt: Date, seenAt: Date) {
        (self.id, self.host, self.pid, self.signingKeys, self.adminKey) = (id, host, pid, signingKeys, adminKey)
        (self.startedAt, self.seenAt) = (startedAt, seenAt)
    }
}

/// Whether a starting server's keys agree with those of the servers already running on the same database.
///
/// Every instance must accept every other's access tokens, and the admin API must take one key everywhere:
/// so the newcomer must verify the key each running instance signs with (it reads their tokens), each running
/// instance must verify the key the newcomer signs with (they read its tokens), and the admin keys must be
/// equal. A key rotation therefore takes two rolling restarts — first `TALLY_SIGNING_KEY=<old>,<new>` on
/// every instance (the new key only verifies), then `<new>,<old>` (it signs, the old one still verifies) —
/// and skipping the first is refused.
public enum KeyAgreement {
    /// How many characters of a fingerprint a message shows.
    static let shown = 8

    /// Why `newcomer` must not start beside `running`, naming the variable to change and what the others use
    /// (fingerprints and positions, never keys); `nil` when they agree.
    public static func refusal(_ newcomer: ServerInstance, running: [ServerInstance]) -> String? {
        if let other = running.first(where: { $0.adminKey != newcomer.adminKey }) {
            return "TALLY_ADMIN_KEY differs from the admin key of the instances already running on this database "
                + "(\(names(running.filter { $0.adminKey != newcomer.adminKey }))): theirs has fingerprint \(short(other.adminKey)), "
                + "this process's \(short(newcomer.adminKey)). Give every instance the same TALLY_ADMIN_KEY."
        }
        let signing = newcomer.signingKeys[0]
        let unreadable = running.filter { !newcomer.signingKeys.contains($0.signingKeys[0]) }
        let refusing = running.filter { !$0.signingKeys.contains(signing) }
        let rotate = "To rotate keys, first deploy TALLY_SIGNING_KEY=<old>,<new> to every instance (the new key only verifies), "
            + "then <new>,<old> (the new key signs, the old one still verifies)."
        switch (unreadable.isEmpty, refusing.isEmpty) {
        case (true, true):
            return nil
        case (true, false):
            return "TALLY_SIGNING_KEY: this process would sign with key \(short(signing)) (first of \(list(newcomer.signingKeys))), "
                + "which the instances already running on this database (\(names(refusing))) do not verify (they verify "
                + "\(list(refusing[0].signingKeys))): they would refuse every token it issues. " + rotate
        case (false, true):
            return "TALLY_SIGNING_KEY: the instances already running on this database (\(names(unreadable))) sign with key "
                + "\(short(unreadable[0].signingKeys[0])), which is not in this process's list (\(list(newcomer.signingKeys))): "
                + "it would refuse every token they issue. Keep their signing key in the list until every instance signs with "
                + "the new one. " + rotate
        case (false, false):
            return "TALLY_SIGNING_KEY differs from that of the instances already running on this database (\(names(unreadable))): "
                + "they sign with key \(short(unreadable[0].signingKeys[0])) and verify \(list(unreadable[0].signingKeys)); "
                + "this process would sign with \(short(signing)) and verify \(list(newcomer.signingKeys)): neither would accept "
                + "the other's tokens. Give every instance the same TALLY_SIGNING_KEY. " + rotate
        }
    }

    /// A fingerprint as messages show it.
    static func short(_ fingerprint: String) -> String { String(fingerprint.prefix(shown)) }

    /// `[1: 3fa9c1d2, 2: 9b7e0c44]`: fingerprints by position in the list.
    static func list(_ fingerprints: [String]) -> String {
        "[" + fingerprints.enumerated().map { "\($0.offset + 1): \(short($0.element))" }.joined(separator: ", ") + "]"
    }

    /// `host-a pid 12, host-b pid 40`.
    static func names(_ instances: [ServerInstance]) -> String {
        let named = instances.prefix(3).map { "\($0.host) pid \($0.pid)" }.joined(separator: ", ")
        return instances.count > 3 ? named + " and \(instances.count - 3) more" : named
    }
}
