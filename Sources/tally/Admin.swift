import ArgumentParser
import Foundation
import TallyAPI
import TallyServer

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `tally admin`: call a running server's admin API (grants, premium, account view).
struct Admin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Administer a running server through its admin API.",
        subcommands: [Grant.self, Premium.self, Show.self, AppStore.self])

    /// Where the server's admin listener is and which key to use.
    struct Connection: ParsableArguments {
        @Option(name: .customLong("admin-url"), help: "Base URL of the server's admin listener (tally serve --admin-port).")
        var url = "http://127.0.0.1:9090"
        @Option(name: .customLong("data-dir"), help: "Where to read the admin key when TALLY_ADMIN_KEY is not set.")
        var dataDirectory = "tally-data"

        func send(_ method: String, _ path: String, body: (some Encodable)? = String?.none, idempotencyKey: String? = nil) async throws {
            let key = try AdminKey.resolve(
                configured: ProcessInfo.processInfo.environment["TALLY_ADMIN_KEY"], dataDirectory: dataDirectory)
            guard let endpoint = URL(string: url + path) else { throw ValidationError("invalid --admin-url") }
            var request = URLRequest(url: endpoint, timeoutInterval: 30)
            request.httpMethod = method
            request.setValue("Bearer \(key.key)", forHTTPHeaderField: "Authorization")
            if let idempotencyKey { request.setValue(idempotencyKey, forHTTPHeaderField: TallyHeader.idempotencyKey) }
            if let body {
                request.httpBody = try TallyJSON.encoder().encode(body)
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            }
            let (data, response) = try await URLSession.shared.data(for: request)
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            print(String(decoding: data, as: UTF8.self))
            guard (200..<300).contains(status) else { throw ExitCode(1) }
        }
    }

    struct Grant: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Grant tokens to a user.")
        @Option(help: "The user id.") var user: String
        @Option(help: "Tokens to add.") var amount: Int64
        @Option(help: "Why (for the ledger).") var reason = "admin"
        @Option(help: "Idempotency-Key, so a retried grant is applied once.") var idempotencyKey: String?
        @OptionGroup var connection: Connection

        func run() async throws {
            try await connection.send(
                "POST", "/admin/v1/users/\(user)/grants", body: GrantRequest(amount: amount, reason: reason),
                idempotencyKey: idempotencyKey ?? UUID().uuidString)
        }
    }

    struct Premium: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Set a user's premium end (ISO 8601), or 'none'.")
        @Option(help: "The user id.") var user: String
        @Option(help: "End of premium, e.g. 2027-01-01T00:00:00Z, or 'none'.") var until: String
        @OptionGroup var connection: Connection

        func run() async throws {
            var date: Date?
            if until != "none" {
                guard let parsed = ISO8601DateFormatter().date(from: until) else { throw ValidationError("--until must be ISO 8601 or 'none'") }
                date = parsed
            }
            try await connection.send("PUT", "/admin/v1/users/\(user)/premium", body: PremiumRequest(until: date))
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "user", abstract: "Show a user's account, wallet and quotas.")
        @Option(help: "The user id.") var user: String
        @OptionGroup var connection: Connection

        func run() async throws {
            try await connection.send("GET", "/admin/v1/users/\(user)")
        }
    }

    /// `tally admin appstore …`: Apple's records against the server's (needs `appStore.serverAPI`).
    struct AppStore: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "appstore", abstract: "Reconcile purchases with Apple's App Store Server API.",
            subcommands: [Reconcile.self, ReplayNotifications.self])

        struct Reconcile: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Credit what Apple's transaction history shows for a user and the server missed (once).")
            @Option(help: "The user id.") var user: String
            @Option(help: "The order id on the customer's receipt email, when the server knows no transaction of the user.")
            var orderId: String?
            @OptionGroup var connection: Connection

            func run() async throws {
                try await connection.send("POST", "/admin/v1/users/\(user)/purchases/reconcile", body: ReconcileRequest(orderId: orderId))
            }
        }

        struct ReplayNotifications: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Apply Apple's notification history since a date (after downtime); each notification once.")
            @Option(help: "The earliest sending time, ISO 8601 (e.g. 2026-11-01T00:00:00Z); Apple keeps 180 days.") var since: String
            @Option(help: "The latest sending time, ISO 8601 (default: now).") var until: String?
            @Flag(help: "Every notification, not only those Apple could not deliver.") var all = false
            @OptionGroup var connection: Connection

            func run() async throws {
                let parse = { (text: String, name: String) throws -> Date in
                    guard let date = ISO8601DateFormatter().date(from: text) else { throw ValidationError("--\(name) must be ISO 8601") }
                    return date
                }
                let request = ReplayNotificationsRequest(
                    since: try parse(since, "since"), until: try until.map { try parse($0, "until") }, onlyFailures: !all)
                try await connection.send("POST", "/admin/v1/appstore/replay-notifications", body: request)
            }
        }
    }
}
