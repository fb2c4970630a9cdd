import Foundation
import TallyStore
import Testing

/// The rule a starting server's keys must meet beside the servers running on the same database.
@Suite("Key agreement", .timeLimit(.minutes(1)))
struct KeyAgreementTests {
    static func instance(_ host: String, signing: [String], admin: String = "a1a1a1a1a1a1") -> ServerInstance {
        ServerInstance(
            id: host, host: host, pid: 7, signingKeys: signing, adminKey: admin, startedAt: Date(timeIntervalSince1970: 0),
            seenAt: Date(timeIntervalSince1970: 0))
    }

    @Test("A rotation in two rolling steps starts at every step, in any mix of the fleet; skipping the first is refused")
    func rotation() {
        let (old, new) = ("0ld0ld0ld0ld", "9e99e99e99e9")
        let steps: [[String]] = [[old], [old, new], [new, old], [new]]
        // Each step's newcomer beside a fleet of the same step and of the step before it (a rolling restart).
        for (index, list) in steps.enumerated() {
            let previous = steps[max(0, index - 1)]
            for fleet in [[previous], [list], [previous, list]] {
                let running = fleet.enumerated().map { Self.instance("host-\($0.offset)", signing: $0.element) }
                #expect(KeyAgreement.refusal(Self.instance("new", signing: list), running: running) == nil, "\(list) beside \(fleet)")
            }
        }
        let skipped = KeyAgreement.refusal(Self.instance("b", signing: [new, old]), running: [Self.instance("a", signing: [old])])
        #expect(
            skipped
                == "TALLY_SIGNING_KEY: this process would sign with key 9e99e99e (first of [1: 9e99e99e, 2: 0ld0ld0l]), which the "
                + "instances already running on this database (a pid 7) do not verify (they verify [1: 0ld0ld0l]): they would "
                + "refuse every token it issues. To rotate keys, first deploy TALLY_SIGNING_KEY=<old>,<new> to every instance "
                + "(the new key only verifies), then <new>,<old> (the new key signs, the old one still verifies).")
        // Dropping the old key while an instance still signs with it.
        let early = KeyAgreement.refusal(Self.instance("b", signing: [new]), running: [Self.instance("a", signing: [old, new])])
        #expect(early?.hasPrefix(
            "TALLY_SIGNING_KEY: the instances already running on this database (a pid 7) sign with key 0ld0ld0l, which is not in "
                + "this process's list ([1: 9e99e99e]): it would refuse every token they issue.") == true, "\(early ?? "")")
    }

    @Test("Different signing keys, or a different admin key, are refused naming the variable")
    func disagreements() {
        let running = [Self.instance("a", signing: ["111111111111"]), Self.instance("c", signing: ["111111111111"])]
        let other = KeyAgreement.refusal(Self.instance("b", signing: ["222222222222"]), running: running)
        #expect(other?.hasPrefix(
            "TALLY_SIGNING_KEY differs from that of the instances already running on this database (a pid 7, c pid 7): they sign "
                + "with key 11111111 and verify [1: 11111111]; this process would sign with 22222222 and verify [1: 22222222]") == true,
            "\(other ?? "")")
        let admin = KeyAgreement.refusal(Self.instance("b", signing: ["111111111111"], admin: "b2b2b2b2b2b2"), running: running)
        #expect(
            admin == "TALLY_ADMIN_KEY differs from the admin key of the instances already running on this database (a pid 7, c pid 7): "
                + "theirs has fingerprint a1a1a1a1, this process's b2b2b2b2. Give every instance the same TALLY_ADMIN_KEY.")
        #expect(KeyAgreement.refusal(Self.instance("b", signing: ["222222222222"]), running: []) == nil, "alone, anything goes")
    }
}
