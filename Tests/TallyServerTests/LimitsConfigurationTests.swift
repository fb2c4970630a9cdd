import Foundation
import TallyServer
import TallyStore
import Testing

/// The `limits:` section of the configuration file.
@Suite("Limits configuration", .timeLimit(.minutes(1)))
struct LimitsConfigurationTests {
    @Test("Missing section or keys keep the defaults; given keys apply")
    func parses() throws {
        let defaults = LimitsConfiguration()
        let empty = try TallyConfiguration(file: "signupGrant: 5\nguestSignupsPerIPPerHour: 30\n", environment: [:]).limits
        #expect(empty.signInPerAddress == defaults.signInPerAddress && empty.sessionsPerUser == 50 && empty.trustedProxies.isEmpty)
        let limits = try TallyConfiguration(
            file: """
                guestSignupsPerIPPerHour: 30
                limits:
                  trustedProxies: [10.0.0.0/8, "fd00::/8", 192.0.2.1]
                  signInPerAddress: {limit: 7, seconds: 30}
                  signInLockout: {failures: 3, seconds: 600}
                  refreshFailuresPerAddress: {limit: 1000, seconds: 60}
                  sessionsPerUser: 10
                """, environment: [:]
        ).limits
        #expect(limits.trustedProxies.map(\.description) == ["10.0.0.0/8", "fd00::/8", "192.0.2.1"])
        #expect(limits.signInPerAddress == RateLimit(7, per: 30))
        #expect(limits.signInLockout.pairFailures == 3 && limits.signInLockout.window == 600)
        #expect(limits.signInLockout.accountFailures == SignInPolicy().accountFailures, "unset lockout keys keep their defaults")
        #expect(limits.refreshFailuresPerAddress == RateLimit(1000, per: 60))
        #expect(limits.linkPerUser == defaults.linkPerUser)
        #expect(limits.sessionsPerUser == 10)
        // The metering part of the same file reads its own keys.
        let both = try TallyConfiguration(file: "guestSignupsPerIPPerHour: 7\nlimits: {sessionsPerUser: 2}\n", environment: [:])
        #expect(both.metering.guestSignupsPerIPPerHour == 7 && both.limits.sessionsPerUser == 2)
    }

    @Test("Bad values and unknown keys are refused with a message naming them")
    func refuses() {
        let cases = [
            ("limits: {trustedProxies: [10.0.0.0/33]}", "trustedProxies"),
            (#"limits: {signInPerAdress: {limit: 1, seconds: 1}}"#, #"unknown key "signInPerAdress" in limits; did you mean "signInPerAddress"?"#),
            ("limits: {linkPerUser: {limit: 0, seconds: 60}}", "linkPerUser"),
            ("limits: {linkPerUser: {limit: 5, seconds: 0}}", "linkPerUser"),
            ("limits: {sessionsPerUser: 0}", "sessionsPerUser"),
            ("limits: {signInLockout: {seconds: 172800}}", "signInLockout"),
            ("limits: {signInLockout: {seconds: 60, maxDelaySeconds: 120}}", "signInLockout"),
            ("limits: {linkPerUser: 5}", "limits.linkPerUser: expected a mapping ({key: value}), found \"5\""),
        ]
        for (yaml, named) in cases {
            do {
                _ = try TallyConfiguration(file: yaml, environment: [:])
                Issue.record("accepted: \(yaml)")
            } catch let error as ConfigurationError {
                #expect(error.description.contains(named), "\(yaml): \(error.description)")
            } catch {
                Issue.record("\(yaml): \(error)")
            }
        }
    }
}
