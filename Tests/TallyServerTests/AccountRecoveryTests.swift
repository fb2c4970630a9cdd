import AsyncHTTPClient
import Foundation
import HTTPTypes
import Logging
import TallyAPI
@testable import TallyServer
import TallyStore
import TallyTestKit
import Testing

/// Password change, reset by a mailed code and email verification, through the real HTTP stack on both stores, with
/// a local mail hook (``MailStandIn``) that checks each mail's signature and keeps what it receives.
@Suite("Account recovery", .timeLimit(.minutes(2)))
struct AccountRecoveryTests {
    /// A server on `kind` whose mail hook is a fresh stand-in, and a connection to it (closed after `body`).
    static func with(
        _ kind: StoreKind, limits: LimitsConfiguration = LimitsConfiguration(), logs: LogCapture? = nil,
        sourceLocation: SourceLocation = #_sourceLocation,
        _ body: @Sendable (LiveServer, MailStandIn, APIConnection) async throws -> Void
    ) async throws {
        try await MailStandIn.with { mail in
            try await LiveServer.with(
                kind, limits: limits, logs: logs,
                configure: { $0.mail = MailConfiguration(webhookURL: mail.url, secret: mail.secret) }, sourceLocation: sourceLocation
            ) { server in
                let api = server.connection()
                defer { Task { await api.close() } }
                try await body(server, mail, api)
            }
        }
    }

    /// A guest linked to a fresh email and `password`.
    static func linkedUser(_ api: APIConnection, password: String = "first password") async throws -> (user: TestUser, email: String) {
        let user = try await api.newGuest()
        let email = "r\(UUID().uuidString.prefix(12).lowercased())@example.com"
        let linked = try await api.send(.post, "/v1/auth/link", token: user.accessToken, json: CredentialsRequest(email: email, password: password))
        #expect(linked.status == .ok, "link: \(linked.text)")
        return (user, email)
    }

    static func signIn(_ api: APIConnection, _ email: String, _ password: String) async throws -> APIResponse {
        try await api.send(.post, "/v1/auth/sign-in", json: CredentialsRequest(email: email, password: password))
    }

    static func forgot(_ api: APIConnection, _ email: String) async throws -> APIResponse {
        try await api.send(.post, "/v1/auth/password/forgot", json: ForgotPasswordRequest(email: email))
    }

    static func reset(_ api: APIConnection, _ email: String, _ code: String, _ password: String) async throws -> APIResponse {
        try await api.send(.post, "/v1/auth/password/reset", json: ResetPasswordRequest(email: email, code: code, newPassword: password))
    }

    /// A code of 8 digits that is not `code`.
    static func wrong(_ code: String, _ n: Int) -> String {
        String(format: "%08d", (Int(code)! + 1 + n) % 100_000_000)
    }

    @Test("A reset code works once, proves the email, and signs every device out", arguments: StoreKind.allCases)
    func resetWorksOnceAndSignsEveryDeviceOut(kind: StoreKind) async throws {
        try await Self.with(kind) { server, mail, api in
            let (user, email) = try await Self.linkedUser(api)
            let other = try await Self.signIn(api, email, "first password").decode(SessionTokens.self)
            let sessions = [(user.accessToken, user.refreshToken), (other.accessToken, other.refreshToken)]
            for (access, _) in sessions { #expect(try await api.send(.get, "/v1/me", token: access).status == .ok) }

            let asked = try await Self.forgot(api, email)
            #expect(asked.status == .accepted && asked.body.isEmpty, "\(asked.status) \(asked.text)")
            let message = try await mail.nextMessage(to: email)
            #expect(message.template == "password_reset")
            #expect(message.code.count == 8 && message.code.allSatisfy(\.isASCII) && Int(message.code) != nil)
            #expect(message.expiresAt == server.clock.now.addingTimeInterval(15 * 60), "valid 15 minutes on the server's clock")
            #expect(message.signedAt == Int64(server.clock.now.timeIntervalSince1970), "signed on the server's clock")

            let done = try await Self.reset(api, email, message.code, "second password")
            #expect(done.status == .ok, "\(done.text)")
            // Every device is signed out: access tokens refused, refresh tokens dead.
            for (access, refresh) in sessions {
                #expect(try await api.send(.get, "/v1/me", token: access).status == .unauthorized)
                #expect(try await api.send(.post, "/v1/auth/refresh", json: RefreshRequest(refreshToken: refresh)).status == .unauthorized)
            }
            #expect(try await Self.signIn(api, email, "first password").status == .unauthorized)
            let fresh = try await Self.signIn(api, email, "second password")
            #expect(fresh.status == .ok)
            let me = try await api.send(.get, "/v1/me", token: try fresh.decode(SessionTokens.self).accessToken).decode(Me.self)
            #expect(me.userId == user.userId && me.emailVerified, "the reset code proved the email")

            // Used once: the same code again is refused, and changes nothing.
            let again = try await Self.reset(api, email, message.code, "third password")
            #expect(again.status == .badRequest && again.errorCode == "invalid_code")
            #expect(try await Self.signIn(api, email, "second password").status == .ok)
            #expect(mail.refused == 0 && mail.messages.count == 1)
        }
    }

    @Test("A reset code expires 15 minutes after it was asked for; a newer one replaces it", arguments: StoreKind.allCases)
    func resetCodeExpires(kind: StoreKind) async throws {
        try await Self.with(kind) { server, mail, api in
            let (_, email) = try await Self.linkedUser(api)
            #expect(try await Self.forgot(api, email).status == .accepted)
            let first = try await mail.nextMessage(to: email)
            server.clock.advance(by: 15 * 60)
            let expired = try await Self.reset(api, email, first.code, "second password")
            #expect(expired.status == .badRequest && expired.errorCode == "invalid_code")

            #expect(try await Self.forgot(api, email).status == .accepted)
            let second = try await mail.nextMessage(to: email, after: 1)
            #expect(try await Self.forgot(api, email).status == .accepted)
            let third = try await mail.nextMessage(to: email, after: 2)
            if second.code != third.code {
                let replaced = try await Self.reset(api, email, second.code, "second password")
                #expect(replaced.status == .badRequest && replaced.errorCode == "invalid_code", "a replaced code still works")
            }
            server.clock.advance(by: 15 * 60 - 1)
            #expect(try await Self.reset(api, email, third.code, "second password").status == .ok, "a second before expiry")
            #expect(try await Self.signIn(api, email, "second password").status == .ok)
        }
    }

    @Test("A reset code dies at the fifth wrong try", arguments: StoreKind.allCases)
    func resetCodeDiesAfterWrongTries(kind: StoreKind) async throws {
        try await Self.with(kind) { server, mail, api in
            let (_, email) = try await Self.linkedUser(api)
            #expect(try await Self.forgot(api, email).status == .accepted)
            let message = try await mail.nextMessage(to: email)
            for attempt in 0..<5 {
                let wrong = try await Self.reset(api, email, Self.wrong(message.code, attempt), "second password")
                #expect(wrong.status == .badRequest && wrong.errorCode == "invalid_code")
            }
            let right = try await Self.reset(api, email, message.code, "second password")
            #expect(right.status == .badRequest && right.errorCode == "invalid_code", "the right code after five wrong ones")
            #expect(try await Self.signIn(api, email, "first password").status == .ok, "nothing changed")

            // Four wrong tries leave a new code working.
            #expect(try await Self.forgot(api, email).status == .accepted)
            let next = try await mail.nextMessage(to: email, after: 1)
            for attempt in 0..<4 {
                #expect(try await Self.reset(api, email, Self.wrong(next.code, attempt), "second password").status == .badRequest)
            }
            #expect(try await Self.reset(api, email, next.code, "second password").status == .ok)
        }
    }

    @Test("Asking for reset codes is rate limited per email and per address, presenting them per address", arguments: StoreKind.allCases)
    func rateLimits(kind: StoreKind) async throws {
        var limits = LimitsConfiguration()
        limits.passwordForgotPerEmail = RateLimit(2, per: 3600)
        limits.passwordForgotPerAddress = RateLimit(4, per: 3600)
        limits.codeAttemptsPerAddress = RateLimit(3, per: 900)
        try await Self.with(kind, limits: limits) { server, _, api in
            let (_, email) = try await Self.linkedUser(api)
            let unknown = "nobody-\(UUID().uuidString.prefix(8).lowercased())@example.com"
            #expect(try await Self.forgot(api, email).status == .accepted)
            #expect(try await Self.forgot(api, email).status == .accepted)
            let perEmail = try await Self.forgot(api, email)
            #expect(perEmail.status == .tooManyRequests && perEmail.errorCode == "rate_limited")
            #expect(Int(perEmail.headers[.retryAfter] ?? "") ?? 0 > 0)
            // The same limit for an email without an account: a 429 tells nothing either.
            #expect(try await Self.forgot(api, unknown).status == .accepted)
            let perAddress = try await Self.forgot(api, unknown)
            #expect(perAddress.status == .tooManyRequests, "four asked from this address (the refused one counted)")
            #expect(try await Self.forgot(api, "third-\(UUID().uuidString.prefix(8).lowercased())@example.com").status == .tooManyRequests)

            for attempt in 0..<3 {
                #expect(try await Self.reset(api, email, Self.wrong("00000000", attempt), "second password").status == .badRequest)
            }
            let attempts = try await Self.reset(api, email, "00000000", "second password")
            #expect(attempts.status == .tooManyRequests && Int(attempts.headers[.retryAfter] ?? "") ?? 0 > 0)
            server.clock.advance(by: 3600)
            #expect(try await Self.forgot(api, email).status == .accepted, "the limits end with their period")
        }
    }

    @Test("Forgot for an email without an account answers exactly as for one with, and sends nothing", arguments: StoreKind.allCases)
    func unknownEmailTellsNothing(kind: StoreKind) async throws {
        try await Self.with(kind) { server, mail, api in
            let known = try await Self.linkedUser(api).email
            let unknown = "nobody-\(UUID().uuidString.prefix(8).lowercased())@example.com"
            let answers = [try await Self.forgot(api, unknown), try await Self.forgot(api, known)]
            let shapes = answers.map { answer in
                "\(answer.status) \(answer.headers.filter { $0.name != .date }.map { "\($0.name)=\($0.value)" }.sorted()) \(answer.text)"
            }
            #expect(shapes[0] == shapes[1], "\(shapes)")
            // Requests are worked off in order: once the known email's mail is here, the unknown one's request is done.
            _ = try await mail.nextMessage(to: known)
            #expect(server.services.mail?.progress.requests == 2)
            #expect(mail.messages.map(\.to) == [known], "mailed: \(mail.messages.map(\.to))")
            #expect(mail.requests == 1 && mail.refused == 0)
        }
    }

    @Test("No log line carries a code, an email, a password or the hook's secret", arguments: StoreKind.allCases)
    func nothingSecretIsLogged(kind: StoreKind) async throws {
        let logs = LogCapture(level: .debug)
        try await Self.with(kind, logs: logs) { _, mail, api in
            let (user, email) = try await Self.linkedUser(api)
            #expect(try await api.send(.post, "/v1/auth/email/verify/send", token: user.accessToken).status == .accepted)
            let verification = try await mail.nextMessage(to: email)
            #expect(try await api.send(.post, "/v1/auth/email/verify", token: user.accessToken, json: VerifyEmailRequest(code: verification.code)).status == .ok)
            let change = ChangePasswordRequest(currentPassword: "first password", newPassword: "second password")
            #expect(try await api.send(.post, "/v1/auth/password", token: user.accessToken, json: change).status == .noContent)
            #expect(try await Self.forgot(api, email).status == .accepted)
            let reset = try await mail.nextMessage(to: email, after: 1)
            #expect(try await Self.reset(api, email, Self.wrong(reset.code, 0), "third password").status == .badRequest)
            #expect(try await Self.reset(api, email, reset.code, "third password").status == .ok)

            let secrets = [verification.code, reset.code, email, mail.secret, "first password", "second password", "third password"]
            let lines = logs.lines
            #expect(!lines.isEmpty && lines.contains { $0.message == "password reset" })
            for line in lines {
                let leaked = secrets.filter { line.text.contains($0) }
                #expect(leaked.isEmpty, "\(line.text)")
            }
        }
    }

    @Test("Changing the password needs the current one, counts wrong ones in the sign-in lockout, and signs the other devices out", arguments: StoreKind.allCases)
    func changePassword(kind: StoreKind) async throws {
        try await LiveServer.with(kind) { server in
            let api = server.connection()
            defer { Task { await api.close() } }
            let (user, email) = try await Self.linkedUser(api)
            let other = try await Self.signIn(api, email, "first password").decode(SessionTokens.self)
            let wrong = ChangePasswordRequest(currentPassword: "not the password", newPassword: "second password")
            let refused = try await api.send(.post, "/v1/auth/password", token: user.accessToken, json: wrong)
            #expect(refused.status == .forbidden && refused.errorCode == "invalid_credentials", "\(refused.text)")
            #expect(try await api.send(.get, "/v1/me", token: other.accessToken).status == .ok, "a refusal changes nothing")

            let change = ChangePasswordRequest(currentPassword: "first password", newPassword: "second password")
            #expect(try await api.send(.post, "/v1/auth/password", token: user.accessToken, json: change).status == .noContent)
            #expect(try await api.send(.get, "/v1/me", token: user.accessToken).status == .ok, "the caller's session stays")
            #expect(try await api.send(.get, "/v1/me", token: other.accessToken).status == .unauthorized, "the others end")
            #expect(try await Self.signIn(api, email, "first password").status == .unauthorized)
            #expect(try await Self.signIn(api, email, "second password").status == .ok)

            // Wrong current passwords count as failed sign-ins of the email from this address: four of them and one
            // wrong sign-in lock the pair (5), and then even the right password is refused, on both doors.
            for _ in 0..<4 {
                #expect(try await api.send(.post, "/v1/auth/password", token: user.accessToken, json: wrong).status == .forbidden)
            }
            #expect(try await Self.signIn(api, email, "wrong password").status == .unauthorized)
            let locked = try await Self.signIn(api, email, "second password")
            #expect(locked.status == .tooManyRequests, "\(locked.text)")
            let lockedChange = ChangePasswordRequest(currentPassword: "second password", newPassword: "third password")
            #expect(try await api.send(.post, "/v1/auth/password", token: user.accessToken, json: lockedChange).status == .tooManyRequests)

            let guest = try await api.newGuest()
            let notLinked = try await api.send(.post, "/v1/auth/password", token: guest.accessToken, json: change)
            #expect(notLinked.status == .conflict && notLinked.errorCode == "not_linked")
        }
    }

    @Test("Email verification: a mailed code sets emailVerified; a wrong code, a guest and a second send are refused", arguments: StoreKind.allCases)
    func emailVerification(kind: StoreKind) async throws {
        try await Self.with(kind) { server, mail, api in
            let (user, email) = try await Self.linkedUser(api)
            #expect(try await api.send(.get, "/v1/me", token: user.accessToken).decode(Me.self).emailVerified == false)
            let sent = try await api.send(.post, "/v1/auth/email/verify/send", token: user.accessToken)
            #expect(sent.status == .accepted && sent.body.isEmpty)
            let message = try await mail.nextMessage(to: email)
            #expect(message.template == "email_verification")
            let wrong = try await api.send(.post, "/v1/auth/email/verify", token: user.accessToken, json: VerifyEmailRequest(code: Self.wrong(message.code, 0)))
            #expect(wrong.status == .badRequest && wrong.errorCode == "invalid_code")
            let verified = try await api.send(.post, "/v1/auth/email/verify", token: user.accessToken, json: VerifyEmailRequest(code: message.code))
            #expect(verified.status == .ok, "\(verified.text)")
            #expect(try verified.decode(Me.self).emailVerified && (try verified.decode(Me.self).userId) == user.userId)
            #expect(try await api.send(.get, "/v1/me", token: user.accessToken).decode(Me.self).emailVerified)
            let admin = try await api.send(.get, "/admin/v1/users/\(user.userId)", admin: true)
            #expect(admin.text.contains("\"emailVerified\":true"), "\(admin.text)")
            let again = try await api.send(.post, "/v1/auth/email/verify/send", token: user.accessToken)
            #expect(again.status == .conflict && again.errorCode == "already_verified")

            let guest = try await api.newGuest()
            let guestSend = try await api.send(.post, "/v1/auth/email/verify/send", token: guest.accessToken)
            #expect(guestSend.status == .conflict && guestSend.errorCode == "not_linked")
            let guestVerify = try await api.send(.post, "/v1/auth/email/verify", token: guest.accessToken, json: VerifyEmailRequest(code: "12345678"))
            #expect(guestVerify.status == .conflict && guestVerify.errorCode == "not_linked")
            #expect(mail.messages.count == 1)
        }
    }

    @Test("Without a mail hook: forgot still answers 202 (nothing is sent), a verification mail is 503 mail_unavailable", arguments: StoreKind.allCases)
    func withoutMail(kind: StoreKind) async throws {
        let logs = LogCapture(level: .notice)
        try await LiveServer.with(kind, logs: logs) { server in
            let api = server.connection()
            defer { Task { await api.close() } }
            let (user, email) = try await Self.linkedUser(api)
            #expect(try await Self.forgot(api, email).status == .accepted)
            let send = try await api.send(.post, "/v1/auth/email/verify/send", token: user.accessToken)
            #expect(send.status == .serviceUnavailable && send.errorCode == "mail_unavailable")
            #expect(logs.lines.contains { $0.message.contains("no mail hook configured") }, "said once at start")
        }
    }

    @Test("Bad input is a 4xx JSON error that changes nothing", arguments: StoreKind.allCases)
    func badInput(kind: StoreKind) async throws {
        try await Self.with(kind) { server, mail, api in
            let (user, email) = try await Self.linkedUser(api)
            let cases: [(String, String?, String, String)] = [
                ("/v1/auth/password/forgot", nil, "{}", "invalid_json"),
                ("/v1/auth/password/forgot", nil, #"{"email":"not an email"}"#, "invalid_field"),
                ("/v1/auth/password/forgot", nil, #"{"email":42}"#, "invalid_json"),
                ("/v1/auth/password/reset", nil, #"{"email":"\#(email)","code":"12345678"}"#, "invalid_json"),
                ("/v1/auth/password/reset", nil, #"{"email":"\#(email)","code":"12345678","newPassword":"short"}"#, "invalid_field"),
                ("/v1/auth/password/reset", nil, #"{"email":"\#(email)","code":"1234","newPassword":"long enough"}"#, "invalid_code"),
                ("/v1/auth/password/reset", nil, #"{"email":"\#(email)","code":"abcdefgh","newPassword":"long enough"}"#, "invalid_code"),
                ("/v1/auth/password", user.accessToken, #"{"currentPassword":"first password"}"#, "invalid_json"),
                ("/v1/auth/password", user.accessToken, #"{"currentPassword":"first password","newPassword":"\#(String(repeating: "é", count: 40))"}"#, "invalid_field"),
                ("/v1/auth/email/verify", user.accessToken, #"{"code":12345678}"#, "invalid_json"),
                ("/v1/auth/email/verify", user.accessToken, #"{"code":"12 45678"}"#, "invalid_code"),
                ("/v1/auth/email/verify", user.accessToken, "[", "invalid_json"),
            ]
            for (path, token, body, code) in cases {
                let response = try await api.send(.post, path, token: token, raw: body)
                #expect(response.status == .badRequest && response.errorCode == code, "\(path) \(body): \(response.status) \(response.text)")
            }
            let unauthenticated = try await api.send(.post, "/v1/auth/password", json: ChangePasswordRequest(currentPassword: "a", newPassword: "b"))
            #expect(unauthenticated.status == .unauthorized)
            #expect(try await Self.signIn(api, email, "first password").status == .ok, "nothing changed")
            #expect(try await api.send(.get, "/v1/me", token: user.accessToken).decode(Me.self).emailVerified == false)
            #expect(mail.messages.isEmpty)
        }
    }

    @Test("The hook's delivery retries a failing hook with backoff on the injected clock, signing each attempt anew")
    func deliveryRetries() async throws {
        try await MailStandIn.with { mail in
            let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
            let hook = MailHook(
                configuration: MailConfiguration(webhookURL: mail.url, secret: mail.secret), clock: clock,
                logger: Logger(label: "mail-test"), progress: MailProgress())
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { Task { try? await client.shutdown() } }
            mail.failNext(2)
            let message = MailMessage(to: "a@example.com", template: "password_reset", code: "01234567", expiresAt: clock.now.addingTimeInterval(900))
            let delivery = Task { await hook.deliver(message, client: client) }
            // Each failed attempt waits on the clock (nothing else sleeps on this one): move it past the longest wait.
            for failed in 1...2 {
                try await clock.waitForSleepers(1)
                #expect(mail.requests == failed && hook.progress.waitingRetries == 1)
                clock.advance(by: MailHook.retryDelay(afterAttempt: failed, unit: 1))
            }
            await delivery.value
            #expect(mail.messages.count == 1 && mail.requests == 3 && hook.progress.deliveredCount == 1)
            #expect(mail.messages.first?.signedAt == Int64(clock.now.timeIntervalSince1970), "signed at the third attempt's time")
            #expect(mail.messages.first?.code == "01234567" && mail.refused == 0)

            // A hook that keeps failing is given up on before the code expires; a refusal (4xx) is not retried.
            mail.failNext(1_000)
            let doomed = Task { await hook.deliver(message, client: client) }
            while hook.progress.failedCount == 0 {
                // A sleeper leaves the list as the clock passes its deadline: each wait is passed once.
                if clock.sleeperCount > 0 { clock.advance(by: 60) }
                await Task.yield()
            }
            await doomed.value
            #expect(clock.now < message.expiresAt.addingTimeInterval(60) && hook.progress.deliveredCount == 1)
            let wrongSecret = MailHook(
                configuration: MailConfiguration(webhookURL: mail.url, secret: "not-the-secret-0123456789abcdef012345"), clock: clock,
                logger: Logger(label: "mail-test"), progress: MailProgress())
            let before = mail.requests
            await wrongSecret.deliver(message, client: client)
            #expect(mail.requests == before + 1 && mail.refused == 1 && wrongSecret.progress.failedCount == 1)
        }
    }

    @Test("A reset on one PostgreSQL process signs the account out on the other as soon as it hears of it")
    func resetAcrossProcesses() async throws {
        try await MailStandIn.with { mail in
            try await ScratchDatabase.with(baseURL: try postgresURL()) { url in
                let config = SyncProtocolTests.processCatalogYAML + SyncFixture.yaml + "\nmail: {webhookURL: \"\(mail.url)\"}\n"
                try await ServerPair.with(url: url, config: config, extraEnvironment: ["TALLY_MAIL_SECRET": mail.secret]) { pair in
                    let (a, b) = (pair.connection(0), pair.connection(1))
                    defer { Task { await a.close(); await b.close() } }
                    let (user, email) = try await Self.linkedUser(a)
                    let other = try await Self.signIn(b, email, "first password").decode(SessionTokens.self)
                    // B trusts both tokens: one's stream is open there, and it just answered with each.
                    let (stream, head) = try await EventStreamClient.open(port: pair.ports[1].api, token: user.accessToken)
                    defer { Task { await stream.close() } }
                    #expect(head.status == 200)
                    guard case .event(name: "wallet", _, _) = try await stream.nextEvent() else { throw HarnessError("no first wallet event") }
                    for token in [user.accessToken, other.accessToken] {
                        #expect(try await b.send(.get, "/v1/wallet", token: token).status == .ok)
                    }
                    #expect(try await Self.forgot(a, email).status == .accepted)
                    let message = try await mail.nextMessage(to: email)
                    let reset = ContinuousClock.now
                    #expect(try await Self.reset(a, email, message.code, "second password").status == .ok)
                    var item = try await stream.nextEvent()
                    while case .event = item { item = try await stream.nextEvent() }
                    #expect(item == .end, "B never heard of the reset")
                    for token in [user.accessToken, other.accessToken] {
                        let read = try await b.send(.get, "/v1/wallet", token: token)
                        #expect(read.status == .unauthorized, "B accepted a token \(ContinuousClock.now - reset) after the reset")
                    }
                    #expect(try await Self.signIn(b, email, "second password").status == .ok)
                }
            }
        }
    }
}
