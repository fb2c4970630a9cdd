import Foundation
import HTTPTypes
import TallyAPI
import Testing

/// Passwords as bcrypt sees them, emails that cannot hide characters, integers written as integers,
/// dates in every RFC 3339 form — each refusal read back to show it changed nothing.
@Suite("Input hardening", .timeLimit(.minutes(10)))
struct InputHardeningTests {
    static func uniqueEmail() -> String { "u\(UUID().uuidString.prefix(8).lowercased())@example.com" }

    @Test("Passwords over 72 bytes are refused at link and sign-in instead of being cut", arguments: StoreKind.allCases)
    func passwordLength(kind: StoreKind) async throws {
        try await LiveServer.with(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let email = Self.uniqueEmail()
            let limit = String(repeating: "A", count: 72)
            let refused = [
                limit + "correct",  // the issue's example: 79 bytes
                String(repeating: "é", count: 36) + "a",  // 37 characters, 73 bytes
                String(repeating: "½", count: 20),  // 40 bytes as sent, 100 after NFKC ("1⁄2")
                "abcdefgh\u{0}anything",  // bcrypt would stop at the NUL
                "ｓｈｏｒｔ",  // 5 characters after NFKC
            ]
            for password in refused {
                let link = try await api.send(.post, "/v1/auth/link", token: user.accessToken, json: CredentialsRequest(email: email, password: password))
                #expect(link.status == .badRequest && link.errorCode == "invalid_field", "\(link.text)")
                let me = try await api.send(.get, "/v1/me", token: user.accessToken).decode(Me.self)
                #expect(me.isGuest && me.email == nil)
            }
            let tooLong = try await api.send(.post, "/v1/auth/link", token: user.accessToken, json: CredentialsRequest(email: email, password: limit + "x"))
            #expect(try tooLong.decode(ErrorResponse.self).error.message.contains("72 bytes"))

            let linked = try await api.send(.post, "/v1/auth/link", token: user.accessToken, json: CredentialsRequest(email: email, password: limit))
            #expect(linked.status == .ok, "\(linked.text)")
            // Before the fix, anything after the 72nd byte was ignored: 'A'*72 + 'anything' signed in.
            let cut = try await api.send(.post, "/v1/auth/sign-in", json: CredentialsRequest(email: email, password: limit + "anything"))
            #expect(cut.status == .badRequest && cut.errorCode == "invalid_field", "\(cut.text)")
            let short = try await api.send(.post, "/v1/auth/sign-in", json: CredentialsRequest(email: email, password: String(limit.dropLast())))
            #expect(short.status == .unauthorized)
            let exact = try await api.send(.post, "/v1/auth/sign-in", json: CredentialsRequest(email: email, password: limit))
            #expect(exact.status == .ok)
            #expect(try exact.decode(SessionTokens.self).userId == user.userId)
            await api.close()
        }
    }

    @Test("Eight code points are long enough, as openapi.yaml's minLength counts, even when they show as fewer characters", arguments: StoreKind.allCases)
    func passwordMinimumCountsCodePoints(kind: StoreKind) async throws {
        try await LiveServer.with(kind) { server in
            let api = server.connection()
            // 4 characters of 2 code points each ("é" as e + combining acute); NFKC composes them to 4. Schemathesis
            // found a schema-valid password like it refused.
            let password = String(repeating: "e\u{301}", count: 4)
            let user = try await api.newGuest()
            let linked = try await api.send(
                .post, "/v1/auth/link", token: user.accessToken, json: CredentialsRequest(email: Self.uniqueEmail(), password: password))
            #expect(linked.status == .ok, "\(linked.text)")
            let seven = try await api.send(
                .post, "/v1/auth/link", token: try await api.newGuest().accessToken,
                json: CredentialsRequest(email: Self.uniqueEmail(), password: String(repeating: "e\u{301}", count: 3) + "x"))
            #expect(seven.status == .badRequest && seven.errorCode == "invalid_field", "\(seven.text)")
            await api.close()
        }
    }

    @Test("Passwords and emails are NFKC-normalised: the same text typed another way is the same", arguments: StoreKind.allCases)
    func normalisation(kind: StoreKind) async throws {
        try await LiveServer.with(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let local = "u\(UUID().uuidString.prefix(8).lowercased())"
            // Fullwidth letters and the 'ﬁ' ligature are compatibility characters: NFKC makes them ASCII.
            let fullwidth = local.unicodeScalars.map { scalar -> String in
                scalar.isASCII && scalar.properties.isAlphabetic ? String(Unicode.Scalar(scalar.value + 0xFEE0)!) : String(scalar)
            }.joined()
            let link = CredentialsRequest(email: "\(fullwidth)＠ｅｘａｍｐｌｅ．ｃｏｍ", password: "ｆｕｌｌｗｉｄｔｈ-ﬁ-cafe\u{301}")
            let linked = try await api.send(.post, "/v1/auth/link", token: user.accessToken, json: link)
            #expect(linked.status == .ok, "\(linked.text)")
            #expect(try linked.decode(Me.self).email == "\(local)@example.com")
            for (email, password) in [
                ("\(local.uppercased())@EXAMPLE.com", "fullwidth-fi-caf\u{E9}"), (link.email, link.password),
                ("\(local)@example.com", "fullwidth-\u{FB01}-cafe\u{301}"),
            ] {
                let signedIn = try await api.send(.post, "/v1/auth/sign-in", json: CredentialsRequest(email: email, password: password))
                #expect(signedIn.status == .ok, "\(email) \(signedIn.text)")
                #expect(try signedIn.decode(SessionTokens.self).userId == user.userId)
            }
            let wrong = try await api.send(.post, "/v1/auth/sign-in", json: CredentialsRequest(email: "\(local)@example.com", password: "fullwidth-fi-cafe"))
            #expect(wrong.status == .unauthorized)
            await api.close()
        }
    }

    /// Characters that would make two addresses look alike: format characters (zero-width, BOM, bidi marks,
    /// embeddings, overrides, isolates, soft hyphen, tags), other default ignorables, blanks.
    static let invisible: [Unicode.Scalar] = [
        "\u{200B}", "\u{200C}", "\u{200D}", "\u{2060}", "\u{FEFF}", "\u{200E}", "\u{200F}", "\u{061C}", "\u{202A}", "\u{202B}",
        "\u{202C}", "\u{202D}", "\u{202E}", "\u{2066}", "\u{2067}", "\u{2068}", "\u{2069}", "\u{00AD}", "\u{180E}", "\u{034F}",
        "\u{FE0F}", "\u{E0041}", "\u{3164}", "\u{FFA0}", "\u{115F}", "\u{2800}", "\u{00A0}", "\u{3000}", "\u{2028}", "\u{E000}",
        "\u{0085}", "\u{7F}", " ",
    ]

    @Test("Emails with invisible or bidi-control characters are refused and change nothing")
    func invisibleEmails() async throws {
        try await LiveServer.with(.sqlite) { server in
            let api = server.connection()
            let owner = try await api.newGuest()
            let email = Self.uniqueEmail()
            let linked = try await api.send(.post, "/v1/auth/link", token: owner.accessToken, json: CredentialsRequest(email: email, password: "long enough"))
            #expect(linked.status == .ok)
            let other = try await api.newGuest()
            for scalar in Self.invisible {
                let lookalike = String(email.prefix(3)) + String(scalar) + String(email.dropFirst(3))
                let link = try await api.send(.post, "/v1/auth/link", token: other.accessToken, json: CredentialsRequest(email: lookalike, password: "long enough"))
                #expect(link.status == .badRequest && link.errorCode == "invalid_field", "U+\(String(scalar.value, radix: 16)): \(link.text)")
                let signIn = try await api.send(.post, "/v1/auth/sign-in", json: CredentialsRequest(email: lookalike, password: "long enough"))
                #expect(signIn.status == .badRequest && signIn.errorCode == "invalid_field", "U+\(String(scalar.value, radix: 16))")
            }
            let me = try await api.send(.get, "/v1/me", token: other.accessToken).decode(Me.self)
            #expect(me.isGuest && me.email == nil)
            await api.close()
        }
    }

    @Test("Admin grants: repeated keys and non-integer amounts are refused and grant nothing")
    func adminGrants() async throws {
        try await LiveServer.with(.sqlite) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let path = "/admin/v1/users/\(user.userId)/grants"
            for body in [#"{"amount":5,"reason":"a","amount":500}"#, #"{"amount":1e3,"reason":"a"}"#, #"{"amount":5.0,"reason":"a"}"#] {
                let response = try await api.send(.post, path, admin: true, raw: body, headers: [.idempotencyKey: UUID().uuidString])
                #expect(response.status == .badRequest && response.errorCode == "invalid_json", "\(body): \(response.text)")
                #expect(try response.decode(ErrorResponse.self).error.message.contains("'amount'"))
            }
            #expect(try await api.wallet(user) == Wallet(balance: 0, held: 0, version: 0))
            let accepted = try await api.send(.post, path, admin: true, raw: #"{"amount":5,"reason":"a"}"#)
            #expect(accepted.status == .created)
            await api.close()
        }
    }

    static let day: TimeInterval = 1_800_000_000 + 86_400  // 2027-01-16T08:00:00Z

    static let acceptedDates: [(String, TimeInterval)] = [
        ("2027-01-16T08:00:00Z", day), ("2027-01-16t08:00:00z", day), ("2027-01-17T05:12:00+21:12", day),
        ("2027-01-15T08:01:00-23:59", day), ("2027-01-16T13:30:00.250+05:30", day + 0.25), ("2027-01-16T03:00:00-05:00", day),
        ("2026-12-31T23:59:60Z", 1_798_761_600), ("0000-01-01T00:00:00Z", -62_167_219_200), ("9999-12-31T23:59:59.5Z", 253_402_300_799.5),
    ]

    static let refusedDates = [
        "2027-01-16T08:00:00", "2027-01-16 08:00:00Z", "2027-01-16T08:00:00+0100", "2027-01-16T08:00:00+24:00",
        "2027-02-29T08:00:00Z", "2027-01-16T24:00:00Z", "2027-01-16T12:00:60Z", "1800086400", "tomorrow",
    ]

    @Test("Premium dates take every RFC 3339 form and refuse the rest, changing nothing", arguments: StoreKind.allCases)
    func premiumDates(kind: StoreKind) async throws {
        try await LiveServer.with(kind) { server in
            let api = server.connection()
            let user = try await api.newGuest()
            let path = "/admin/v1/users/\(user.userId)/premium"
            func premiumUntil() async throws -> Date? {
                try await api.send(.get, "/admin/v1/users/\(user.userId)", admin: true).decode(AdminView.self).me.premiumUntil
            }
            for (text, seconds) in Self.acceptedDates {
                let set = try await api.send(.put, path, admin: true, raw: #"{"until":"\#(text)"}"#)
                #expect(set.status == .ok, "\(text): \(set.text)")
                // Responses show whole seconds.
                let expected = Date(timeIntervalSince1970: seconds.rounded(.down))
                #expect(try set.decode(Me.self).premiumUntil == expected, "\(text)")
                #expect(try await premiumUntil() == expected, "\(text)")
            }
            let kept = try await premiumUntil()
            for text in Self.refusedDates {
                let refused = try await api.send(.put, path, admin: true, raw: #"{"until":"\#(text)"}"#)
                #expect(refused.status == .badRequest && refused.errorCode == "invalid_json", "\(text): \(refused.text)")
                #expect(try refused.decode(ErrorResponse.self).error.message.contains("'until'"), "\(refused.text)")
                #expect(try await premiumUntil() == kept)
            }
            let twice = try await api.send(.put, path, admin: true, raw: #"{"until":null,"until":"2027-01-16T08:00:00Z"}"#)
            #expect(twice.status == .badRequest && twice.errorCode == "invalid_json")
            #expect(try await premiumUntil() == kept)
            await api.close()
        }
    }

    /// The part of the admin user view these tests read.
    struct AdminView: Decodable {
        let me: Me
    }
}
