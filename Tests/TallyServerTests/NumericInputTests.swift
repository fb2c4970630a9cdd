import Foundation
import HTTPTypes
import TallyAPI
import TallyAppStore
import TallyAppleID
import TallyDevAppStore
import TallyLoad
import TallyStore
import Testing

/// No number stops the server (issue 43, finding 1): `GET /v1/purchases?cursor=9223372036854775807.x` trapped converting
/// the cursor's instant to milliseconds, and so did signed App Store payloads whose dates lie beyond 64 bits of
/// milliseconds. A real `tally serve` process (so that a trap kills something the test sees) on each store, with the
/// App Store, Sign in with Apple, the AI gateway and synced collections configured, gets random numbers — ±2⁶⁴, 1e±400,
/// `-0`, NaN and Infinity spellings, huge exponents, 20-digit integers, `<millis>.<id>` cursors — in every query,
/// cursor, header, path and body field of every operation openapi.yaml lists (and the console's cursors), and in every
/// date of a signed App Store payload and every time of a Sign in with Apple token or notification. Nothing may answer
/// 5xx or stop the process, and a refusal changes nothing of its user. Seeded (`SplitMix64`): a failure names its seed
/// and case.
@Suite("Numbers from outside never stop the server", .timeLimit(.minutes(5)))
struct NumericInputTests {
    /// The seed of every run (a failure prints it with the case).
    static let seed: UInt64 = 43

    /// Runs `body` on a fuzz server on `kind` with the seeded generator, then checks that the process still lives.
    static func fuzz(_ kind: StoreKind, _ what: String, _ body: @escaping @Sendable (FuzzServer, inout SplitMix64) async throws -> Void) async throws {
        try await FuzzServer.with(kind) { server in
            var random = SplitMix64(seed: Self.seed)
            try await body(server, &random)
            try server.expectAlive("after \(what)")
        }
    }

    @Test("Random numbers in every field of every route: no 5xx, the process lives, a refusal changes nothing", arguments: StoreKind.allCases)
    func everyField(kind: StoreKind) async throws {
        try await Self.fuzz(kind, "every route") { server, random in
            let cases = try RouteFuzz.cases(&random)
            #expect(cases.count > 300, "\(cases.count) cases")
            var statuses: [Int: Int] = [:]
            for (index, fuzzCase) in cases.enumerated() {
                statuses[try await server.check(fuzzCase, index: index), default: 0] += 1
            }
            print("[\(kind)] \(cases.count) cases over \(Set(cases.map(\.operation)).count) operations, answered \(statuses.sorted { $0.key < $1.key })")
            try await server.fuzzConsole(&random)
        }
    }

    @Test("Random numbers as every date of signed App Store transactions, renewals and notifications: no 5xx, nothing applied when refused", arguments: StoreKind.allCases)
    func appStoreDates(kind: StoreKind) async throws {
        try await Self.fuzz(kind, "the App Store dates") { server, random in try await server.fuzzAppStoreDates(&random, rounds: 8) }
    }

    @Test("Random numbers as the times of Sign in with Apple tokens and notifications: no 5xx, refused beyond the years 2000 to 9999", arguments: StoreKind.allCases)
    func appleTimes(kind: StoreKind) async throws {
        try await Self.fuzz(kind, "the Apple times") { server, random in try await server.fuzzAppleTimes(&random, rounds: 12) }
    }

    @Test("The number spellings are what the issue asks for, and reproducible")
    func spellings() {
        var first = SplitMix64(seed: 7)
        var second = SplitMix64(seed: 7)
        let drawn = (0..<2_000).map { _ in NumberSpellings.any(&first) }
        #expect(drawn == (0..<2_000).map { _ in NumberSpellings.any(&second) })
        for expected in ["18446744073709551616", "-18446744073709551616", "1e400", "1e-400", "-0", "NaN", "Infinity", "9223372036854775807"] {
            #expect(drawn.contains(expected), "\(expected)")
        }
        #expect(drawn.contains { $0.count == 20 && $0.allSatisfy(\.isNumber) }, "20-digit integers")
        #expect(drawn.contains { $0.contains("e") && ($0.split(separator: "e").last.flatMap { Int($0) }.map { abs($0) > 10_000 } ?? false) }, "huge exponents")
        var cursors = SplitMix64(seed: 8)
        let drawnCursors = (0..<500).map { _ in NumberSpellings.cursor(&cursors) }
        #expect(drawnCursors.contains("9223372036854775807.x"))
        #expect(drawnCursors.contains { $0.hasSuffix(".x") && $0.hasPrefix("-") })
    }
}

/// Numbers as outsiders write them: edges of every integer width, beyond them, floating-point extremes, spellings no
/// parser should take, and random ones of every size.
enum NumberSpellings {
    static let edges = [
        "0", "-0", "-0.0", "0.0", "00", "007", "1", "-1", "+1", "1.5", "-1.5", "2147483647", "2147483648", "-2147483649", "4294967296",
        "9007199254740993", "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
        "18446744073709551615", "18446744073709551616", "-18446744073709551616", "99999999999999999999", "1e400", "-1e400", "1e-400",
        "1E308", "1.7976931348623157e308", "-1.7976931348623157e308", "4.9e-324", "5e-324", "1e99999999999", "-1e99999999999",
        "1e-99999999999", "0e99999999999", "NaN", "-NaN", "nan", "Infinity", "-Infinity", "infinity", "inf", "-inf", "1e", "1e+",
        ".5", "5.", "0x10", "1_000", "1,5", "--1", "١٢", "１２", "253402300799999", "253402300800000", "-62135596801000",
        "946684799999", "9223372036854775.807", "9.223372036854775807e18", "-9.3e18", "1e19", "1e300", "-1e300",
    ]

    /// One number: an edge, a random 64-bit integer, a 20-digit integer, a random double, or digits with a huge exponent.
    static func any(_ random: inout SplitMix64) -> String {
        switch random.next() % 6 {
        case 0, 1: return edges[Int(random.next() % UInt64(edges.count))]
        case 2: return String(Int64(bitPattern: random.next()))
        case 3: return String(random.next() % 9 + 1) + String(format: "%019llu", random.next() % 10_000_000_000_000_000_000)
        case 4:
            let value = Double(bitPattern: random.next())
            return value.isFinite ? "\(value)" : "1e309"
        default:
            let exponent = Int64(random.next() % 200_000) - 100_000
            return String(random.next() % 1_000_000) + "e" + String(exponent)
        }
    }

    /// The cursor of issue 43 that stopped the process: its instant, 2⁶³ − 1 ms, converted back to milliseconds trapped.
    static let issue43Cursor = "9223372036854775807.x"

    /// A cursor-shaped value: `<number>.<id>` (what the purchase and console cursors look like), or a number alone.
    static func cursor(_ random: inout SplitMix64) -> String {
        switch random.next() % 5 {
        case 0: return issue43Cursor
        case 1: return any(&random) + ".x"
        case 2: return any(&random) + "." + UUID(uuidString: "3f0e0a53-7bb1-4c50-9d39-2a5c1e7b0001")!.uuidString.lowercased()
        case 3: return "-" + String(random.next() % UInt64(Int64.max)) + ".x"
        default: return any(&random)
        }
    }
}

/// One request of the fuzz: where a number went, and the request.
struct FuzzCase: Sendable, CustomStringConvertible {
    /// `METHOD /path` as openapi.yaml writes it.
    var operation: String
    /// The field the number went to (`query cursor`, `body amount`, …) and the number.
    var field: String
    var value: String
    /// The path with its parameters, the query.
    var path: String
    var headers: [(String, String)]
    var body: String?
    var contentType = "application/json"
    /// Who calls: the user, the admin key, or nobody.
    var caller: Caller
    /// What the user needs before: an open hold (`{holdId}`), a document (`{docId}`).
    var needs: Set<Need>

    enum Caller: Sendable { case user, admin, nobody }
    enum Need: Sendable { case hold, document }

    var description: String { "\(operation) — \(field) = \(value)" }
}

/// The cases: every operation of openapi.yaml, each field of it in turn given numbers, the rest valid.
enum RouteFuzz {
    /// Placeholders the check fills in per case (the case's own user, hold, tokens).
    static let userId = "{{userId}}", holdId = "{{holdId}}", accessToken = "{{accessToken}}", refreshToken = "{{refreshToken}}"
    static let signedTransaction = "{{signedTransaction}}", signedNotification = "{{signedNotification}}"
    static let identityToken = "{{identityToken}}", appleNonce = "{{appleNonce}}", appleNotification = "{{appleNotification}}"
    /// Where a number goes in a body: the JSON text is the template's with this string (quoted) replaced.
    static let marker = "@@NUMBER@@"

    /// A valid body of each operation that takes one (a test of its own when a route is added: ``cases(_:)`` fails).
    static let bodies: [String: String] = [
        "POST /v1/auth/guest": #"{"deviceId":"fuzz-device-0123456789abcdef"}"#,
        "POST /v1/auth/attestation": #"{"keyId":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","attestation":"AAAA","challenge":"c"}"#,
        "POST /v1/auth/refresh": #"{"refreshToken":"\#(refreshToken)"}"#,
        "POST /v1/auth/revoke": #"{"refreshToken":"\#(refreshToken)"}"#,
        "POST /v1/purchases/apple": #"{"signedTransaction":"\#(signedTransaction)"}"#,
        "POST /v1/webhooks/appstore": #"{"signedPayload":"\#(signedNotification)"}"#,
        "POST /v1/webhooks/apple-id": #"{"payload":"\#(appleNotification)"}"#,
        "POST /v1/auth/sign-in": #"{"email":"nobody@example.com","password":"correct horse","merge":false}"#,
        "POST /v1/auth/apple": #"{"identityToken":"\#(identityToken)","nonce":"\#(appleNonce)","merge":false}"#,
        "POST /v1/auth/link": #"{"email":"fuzz@example.com","password":"correct horse"}"#,
        "POST /v1/auth/password": #"{"currentPassword":"correct horse","newPassword":"battery staple"}"#,
        "POST /v1/auth/password/forgot": #"{"email":"nobody@example.com"}"#,
        "POST /v1/auth/password/reset": #"{"email":"nobody@example.com","code":"12345678","newPassword":"battery staple"}"#,
        "POST /v1/auth/email/verify": #"{"code":"12345678"}"#,
        "PATCH /v1/me": #"{"timezone":"Europe/Paris","language":"fr"}"#,
        "POST /v1/wallet/holds": #"{"amount":5,"ttlSeconds":600}"#,
        "POST /v1/wallet/holds/{holdId}/capture": #"{"amount":2}"#,
        "PUT /v1/collections/{collection}/docs/{docId}": #"{"data":{"date":"2027-01-16","done":true,"count":3}}"#,
        "PATCH /v1/collections/{collection}/docs/{docId}": #"{"done":false,"count":4}"#,
        "POST /v1/sync/push":
            #"{"clientId":"fuzz-client-0123456789","mutations":[{"id":1,"op":"put","collection":"habit_logs","docId":"h2","data":{"date":"2027-01-17","n":1}},{"id":2,"op":"delete","collection":"habit_logs","docId":"h1","ifVersion":1}]}"#,
        "POST /v1/ai/chat/completions":
            #"{"model":"chat","messages":[{"role":"user","content":"hello"}],"max_tokens":8,"temperature":0.5,"top_p":1,"n":1,"seed":7,"presence_penalty":0,"frequency_penalty":0,"top_logprobs":0,"stream":false}"#,
        "POST /admin/v1/users/{userId}/grants": #"{"amount":5,"reason":"fuzz"}"#,
        "POST /admin/v1/users/{userId}/purchases/reconcile": #"{"orderId":"MQ12345678"}"#,
        "POST /admin/v1/appstore/replay-notifications": #"{"since":"2027-01-14T00:00:00Z","until":"2027-01-15T00:00:00Z","onlyFailures":true}"#,
        "POST /v1/purchases/consumption-consent": #"{"consented":true}"#,
        "POST /v1/purchases/apple/offers":
            #"{"productId":"com.example.premium.monthly","offerIdentifier":"comeback50","kind":"promotional","appTransactionId":"2000000000000042"}"#,
        "PUT /admin/v1/users/{userId}/premium": #"{"until":"2030-01-01T00:00:00Z"}"#,
    ]

    /// The value of each path parameter when it is not the field fuzzed.
    static let pathValues = [
        "holdId": holdId, "userId": userId, "collection": "habit_logs", "docId": "h1", "name": "reading",
    ]

    /// Every case, numbers drawn from `random`: per field, two numbers (four for a cursor).
    static func cases(_ random: inout SplitMix64) throws -> [FuzzCase] {
        let spec = try OpenAPITests.loadSpec()
        let operations = try OpenAPITests.operations(spec)
        var cases: [FuzzCase] = []
        var missing: [String] = []
        for (key, operation) in operations.sorted(by: { $0.key < $1.key }) {
            let parts = key.split(separator: " ", maxSplits: 1).map(String.init)
            let (method, template) = (parts[0], parts[1])
            let item = OpenAPITests.mapping(OpenAPITests.mapping(spec["paths"])?[template]) ?? [:]
            let parameters = ((item["parameters"] as? [Any]) ?? []) + ((operation["parameters"] as? [Any]) ?? [])
            var fields: [(place: String, name: String)] = parameters.compactMap { entry in
                var parameter = OpenAPITests.mapping(entry)
                if let ref = parameter?["$ref"] as? String { parameter = OpenAPITests.mapping(OpenAPITests.resolve(ref, in: spec)) }
                guard let place = parameter?["in"] as? String, let name = parameter?["name"] as? String else { return nil }
                return (place, name)
            }
            fields.append(("header", "Authorization"))
            var bodyTemplate = bodies[key]
            if operation["requestBody"] != nil, bodyTemplate == nil { missing.append(key) }
            // The events stream with a valid request would never end: only its cursors are fuzzed.
            if key == "GET /v1/sync/events" { bodyTemplate = nil }
            let caller: FuzzCase.Caller =
                template.hasPrefix("/admin/") || template == "/metrics" ? .admin
                : ["/health", "/ready", "/v1/auth/guest", "/v1/auth/attestation/challenge", "/v1/auth/refresh", "/v1/auth/revoke", "/v1/webhooks/appstore", "/v1/webhooks/apple-id",
                   "/v1/auth/sign-in", "/v1/auth/apple", "/v1/auth/password/forgot", "/v1/auth/password/reset"].contains(template) ? .nobody : .user
            var needs = Set<FuzzCase.Need>()
            if template.contains("{holdId}") { needs.insert(.hold) }
            if template.contains("{docId}") { needs.insert(.document) }
            let contentType = key.hasPrefix("PATCH /v1/collections") ? "application/merge-patch+json" : "application/json"
            func make(_ field: String, _ value: String, path: [String: String] = [:], query: [String: String] = [:], headers: [String: String] = [:], body: String?) -> FuzzCase {
                var concrete = template
                for (name, standard) in pathValues {
                    // Only the number is percent-encoded: the standard values (and placeholders) are sent as they are.
                    let value = path[name].map { $0.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(["-", ".", "_", "~"])) ?? $0 }
                    concrete = concrete.replacingOccurrences(of: "{\(name)}", with: value ?? standard)
                }
                if !query.isEmpty {
                    concrete += "?" + query.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0.value)" }.joined(separator: "&")
                }
                var sent = headers
                if sent["Idempotency-Key"] == nil, method != "GET" { sent["Idempotency-Key"] = "fuzz-" + UUID().uuidString }
                return FuzzCase(
                    operation: key, field: field, value: value, path: concrete, headers: sent.sorted { $0.key < $1.key }, body: body,
                    contentType: contentType, caller: caller, needs: needs)
            }
            for (place, name) in fields {
                let cursorLike = ["cursor", "after", "before", "Last-Event-ID", "If-Match", "If-None-Match"].contains(name)
                for draw in 0..<(cursorLike ? 4 : 2) {
                    // A cursor gets issue 43's own first (it stopped the process), then random ones.
                    let value = cursorLike ? (draw == 0 ? NumberSpellings.issue43Cursor : NumberSpellings.cursor(&random)) : NumberSpellings.any(&random)
                    switch place {
                    case "path": cases.append(make("path \(name)", value, path: [name: value], body: bodyTemplate))
                    case "query": cases.append(make("query \(name)", value, query: [name: value], body: bodyTemplate))
                    default: cases.append(make("header \(name)", value, headers: [name: name == "Authorization" ? "Bearer \(value)" : value], body: bodyTemplate))
                    }
                }
            }
            if let bodyTemplate {
                for leaf in try leaves(of: bodyTemplate) {
                    for _ in 0..<2 {
                        let value = NumberSpellings.any(&random)
                        // Mostly as a JSON number, sometimes as a string: a number where text is expected and the reverse.
                        let token = random.next() % 4 == 0 ? "\"\(value)\"" : value
                        cases.append(make("body \(leaf.name)", token, body: leaf.body.replacingOccurrences(of: "\"\(marker)\"", with: token)))
                    }
                }
            }
            if fields.isEmpty, bodyTemplate == nil { cases.append(make("none", "", body: nil)) }
        }
        #expect(missing.isEmpty, "operations with a body and no valid body to fuzz from in RouteFuzz.bodies: \(missing)")
        return cases
    }

    /// Each leaf (number, string, boolean, null) of the JSON `template`: its path and the template with it replaced by
    /// the quoted ``marker``.
    static func leaves(of template: String) throws -> [(name: String, body: String)] {
        let root = try JSONSerialization.jsonObject(with: Data(template.utf8), options: [.fragmentsAllowed])
        var found: [(String, String)] = []
        func walk(_ node: Any, path: [Any]) throws {
            if let object = node as? [String: Any] {
                for key in object.keys.sorted() { try walk(object[key]!, path: path + [key]) }
            } else if let array = node as? [Any] {
                for (index, element) in array.enumerated() { try walk(element, path: path + [index]) }
            } else {
                let replaced = replacing(root, at: path[...])
                let text = String(decoding: try JSONSerialization.data(withJSONObject: replaced, options: [.sortedKeys, .withoutEscapingSlashes]), as: UTF8.self)
                found.append((path.map { "\($0)" }.joined(separator: "."), text))
            }
        }
        try walk(root, path: [])
        return found
    }

    private static func replacing(_ node: Any, at path: ArraySlice<Any>) -> Any {
        guard let first = path.first else { return marker }
        if var object = node as? [String: Any], let key = first as? String {
            object[key] = replacing(object[key]!, at: path.dropFirst())
            return object
        }
        if var array = node as? [Any], let index = first as? Int {
            array[index] = replacing(array[index], at: path.dropFirst())
            return array
        }
        return node
    }
}
