import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Mustache
import TallyAPI
import NIOCore
import TallyStore

/// The operator's console: server-rendered pages on the admin listener only (`/` and `/console/*`), behind a sign-in
/// with the admin key. Each page is read from the store through indexes and pages; each action goes through the same
/// store commands as the admin API and is written to the audit log.
///
/// Security: the key is posted once (never in a URL) and checked by the admin API's own check, so wrong keys count
/// against `adminFailuresPerAddress` there too; the session is a random cookie (`HttpOnly`, `SameSite=Strict`, `Secure`
/// behind a trusted proxy that says `X-Forwarded-Proto: https`); every form carries the session's CSRF token; every
/// page has a Content-Security-Policy without scripts and `X-Frame-Options: DENY`.
struct ConsoleController: Sendable {
    /// The store, clock, quota views, command runner and audit log, shared with the admin API.
    let tools: OperatorTools
    /// Told of the wallets the actions change.
    let notifier: any ChangeNotifier
    /// Ends the users' sessions the actions revoke or delete.
    let userSessions: SessionKeeper
    /// Revokes a deleted account's Apple refresh token.
    let appleTokens: AppleTokenRevocation
    /// The App Store views (order lookup, a purchase's timeline).
    let purchases: ConsolePurchases
    /// What the pages say of the server: its database, whether App Attest is on, the trusted proxies.
    let setup: ConsoleSetup
    let keyCheck: AdminKeyMiddleware
    /// The operators' sessions.
    let sessions: ConsoleSessions
    let samples: ProcessSamples
    let overview: OverviewCache

    static let cookie = "tally_console"
    /// The sign-in form's CSRF token before there is a session (double-submit: cookie and field must match).
    static let signInCookie = "tally_console_signin"

    /// The console over `tools`, its sign-in checked by `keyCheck` (the admin API's), its charts from `samples`; takes
    /// the first sample now.
    init(
        tools: OperatorTools, notifier: any ChangeNotifier, userSessions: SessionKeeper, appleTokens: AppleTokenRevocation,
        purchases: ConsolePurchases, setup: ConsoleSetup, keyCheck: AdminKeyMiddleware, samples: ProcessSamples
    ) {
        self.tools = tools
        self.notifier = notifier
        self.userSessions = userSessions
        self.appleTokens = appleTokens
        self.purchases = purchases
        self.setup = setup
        self.keyCheck = keyCheck
        self.sessions = ConsoleSessions()
        self.samples = samples
        self.overview = OverviewCache(store: tools.store)
        samples.sample(now: tools.clock.now)  // the baseline: the first overview shows what happened since start
    }

    /// The database.
    var store: any TallyStorage { tools.store }
    var clock: any TallyClock { tools.clock }

    func addRoutes(to router: Router<TallyRequestContext>) {
        let group = router.group().add(middleware: ConsoleHeadersMiddleware())
        group.get("/", use: overviewPage)
        group.get("console/console.css", use: stylesheet)
        group.get("console/sign-in", use: signInPage)
        group.post("console/sign-in", use: signIn)
        group.post("console/sign-out", use: signOut)
        group.post("console/find", use: find)
        group.get("console/users", use: usersPage)
        group.get("console/users/:userId", use: userPage)
        group.post("console/users/:userId/grant", use: grant)
        group.post("console/users/:userId/premium", use: premium)
        group.post("console/users/:userId/revoke-sessions", use: revokeSessions)
        group.post("console/users/:userId/delete", use: delete)
        group.get("console/audit", use: auditPage)
        group.get("console/purchases/:transactionId", use: purchasePage)
    }

    // MARK: Sign-in

    @Sendable func stylesheet(_ request: Request, context: TallyRequestContext) async throws -> Response {
        var response = Self.text(ConsoleTemplates.css, type: "text/css; charset=utf-8")
        response.headers[.cacheControl] = "private, max-age=300"
        return response
    }

    @Sendable func signInPage(_ request: Request, context: TallyRequestContext) async throws -> Response {
        if signedIn(request) != nil { return Self.redirect("/") }
        // While the operator types the key, the overview reads its week (1.3 s for 1,000,000 entries, release, SQLite):
        // the page after sign-in then answers from memory. At most one read at a time, and none while numbers are fresh.
        overview.prefetch(now: clock.now)
        return signInForm(status: .ok, notice: nil)
    }

    private func signInForm(status: HTTPResponse.Status, notice: String?) -> Response {
        let token = Secrets.random(bytes: 24)
        var response = render(
            "sign-in", title: "Sign in", session: nil, csrf: token, notice: notice, status: status, [:])
        response.headers.append(HTTPField(name: .setCookie, value: cookie(Self.signInCookie, token, maxAge: 3600, secure: false)))
        return response
    }

    @Sendable func signIn(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let form = try await Self.form(request, context: context)
        guard let expected = Self.cookies(request)[Self.signInCookie], let csrf = form["csrf"],
            Secrets.constantTimeEqual(csrf, expected)
        else { throw APIError(.forbidden, "The form's CSRF token is missing or wrong: load the page again.") }
        do {
            try keyCheck.verify(form["key"], request: request, context: context)
        } catch let error as APIError where error.status == .unauthorized {
            return signInForm(status: .unauthorized, notice: "That is not the admin key.")
        } catch let error as APIError where error.status == .tooManyRequests {
            var response = signInForm(status: .tooManyRequests, notice: "Too many wrong keys from this address: try again later.")
            if let retry = error.headers[.retryAfter] { response.headers[.retryAfter] = retry }
            return response
        }
        let (token, session) = sessions.open(now: clock.now)
        context.logger.notice("console sign-in", metadata: ["tally.operator": .string(session.label)])
        var response = Self.redirect("/")
        let secure = isSecure(request, context: context)
        response.headers.append(
            HTTPField(name: .setCookie, value: cookie(Self.cookie, token, maxAge: Int(saturating: ConsoleSessions.lifetime), secure: secure)))
        response.headers.append(HTTPField(name: .setCookie, value: cookie(Self.signInCookie, "", maxAge: 0, secure: secure)))
        return response
    }

    @Sendable func signOut(_ request: Request, context: TallyRequestContext) async throws -> Response {
        let (token, _, _) = try await authorizedPost(request, context: context)
        sessions.close(token)
        var response = Self.redirect("/console/sign-in")
        response.headers.append(HTTPField(name: .setCookie, value: cookie(Self.cookie, "", maxAge: 0, secure: isSecure(request, context: context))))
        return response
    }

    // MARK: Sessions, forms and rendering

    /// The signed-in operator's token and session, if the request has a live one.
    func signedIn(_ request: Request) -> (token: String, session: ConsoleSessions.Session)? {
        guard let token = Self.cookies(request)[Self.cookie], let session = sessions.session(token, now: clock.now) else {
            return nil
        }
        return (token, session)
    }

    /// A form posted by a signed-in operator with the session's CSRF token; 403 otherwise (401 without a session).
    func authorizedPost(_ request: Request, context: TallyRequestContext) async throws -> (
        token: String, session: ConsoleSessions.Session, form: ConsoleForm
    ) {
        let form = try await Self.form(request, context: context)
        guard let (token, session) = signedIn(request) else {
            throw APIError(.unauthorized, "Sign in to the console first.")
        }
        guard let csrf = form["csrf"], Secrets.constantTimeEqual(csrf, session.csrf) else {
            throw APIError(.forbidden, "The form's CSRF token is missing or wrong: load the page again.")
        }
        return (token, session, form)
    }

    static func form(_ request: Request, context: TallyRequestContext) async throws -> ConsoleForm {
        guard request.headers[.contentType]?.lowercased().hasPrefix("application/x-www-form-urlencoded") == true else {
            throw APIError(.forbidden, "The console takes forms only.")
        }
        let body = try await request.body.collect(upTo: 16 * 1024)
        return ConsoleForm(String(buffer: body))
    }

    static func cookies(_ request: Request) -> [String: String] {
        var cookies: [String: String] = [:]
        for header in request.headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2 else { continue }
                let name = parts[0].trimmingCharacters(in: .whitespaces)
                if cookies[name] == nil { cookies[name] = parts[1].trimmingCharacters(in: .whitespaces) }
            }
        }
        return cookies
    }

    /// `Secure` when the request came through a trusted proxy that says the client used HTTPS (the listener itself
    /// speaks plain HTTP: reach it through an SSH tunnel or a TLS-terminating proxy on a private network).
    func isSecure(_ request: Request, context: TallyRequestContext) -> Bool {
        guard request.headers[.xForwardedProto]?.lowercased() == "https", let peer = context.peer.flatMap(ClientIP.init) else {
            return false
        }
        return setup.trustedProxies.contains { $0.contains(peer) }
    }

    func cookie(_ name: String, _ value: String, maxAge: Int, secure: Bool) -> String {
        "\(name)=\(value); Path=/; Max-Age=\(maxAge); HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
    }

    /// Renders `template` with `data` inside the layout.
    func render(
        _ template: String, title: String, session: ConsoleSessions.Session?, csrf: String? = nil, notice: String? = nil,
        status: HTTPResponse.Status = .ok, zone: Bool = false, _ data: [String: Any]
    ) -> Response {
        var data = data
        let csrf = csrf ?? session?.csrf ?? ""
        data["csrf"] = csrf
        let content = ConsoleTemplates.library.render(data, withTemplate: template) ?? ""
        var layout: [String: Any] = ["title": title, "signedIn": session != nil, "csrf": csrf, "content": content, "zone": zone]
        if let notice { layout["notice"] = notice }
        let html = ConsoleTemplates.library.render(layout, withTemplate: "layout") ?? ""
        var response = Self.text(html, type: "text/html; charset=utf-8")
        response.status = status
        return response
    }

    /// A page for a signed-in operator, or the way to the sign-in form.
    func page(
        _ request: Request, _ make: (ConsoleSessions.Session) async throws -> Response
    ) async throws -> Response {
        guard let (_, session) = signedIn(request) else { return Self.redirect("/console/sign-in") }
        do {
            return try await make(session)
        } catch let error as APIError where error.status.code < 500 {
            return render("message", title: "Not found", session: session, status: error.status,
                ["heading": error.status == .notFound ? "Not found" : "Refused", "text": error.body.error.message, "back": "/"])
        }
    }

    static func text(_ text: String, type: String) -> Response {
        Response(
            status: .ok, headers: [.contentType: type, .cacheControl: "no-store"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    static func redirect(_ location: String) -> Response {
        Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
    }
}

/// The console's response headers: no script anywhere, no framing, no caching of pages, no referrer.
struct ConsoleHeadersMiddleware: RouterMiddleware {
    typealias Context = TallyRequestContext

    static let policy =
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        response.headers[.contentSecurityPolicy] = Self.policy
        response.headers[.xFrameOptions] = "DENY"
        response.headers[.xContentTypeOptions] = "nosniff"
        response.headers[.referrerPolicy] = "no-referrer"
        return response
    }
}

extension HTTPField.Name {
    static let xForwardedProto = HTTPField.Name("X-Forwarded-Proto")!
    static let xFrameOptions = HTTPField.Name("X-Frame-Options")!
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
}

/// What the console's pages say of the server, fixed at start: the kind of its database, whether it verifies App
/// Attest, and the proxies whose `X-Forwarded-Proto` makes its cookies `Secure`.
struct ConsoleSetup: Sendable {
    /// `SQLite` or `PostgreSQL`.
    let databaseKind: String
    /// Whether the configuration has an `appAttest:` section (a user's page then shows its attestation).
    let showsAttestation: Bool
    /// ``LimitsConfiguration/trustedProxies``.
    let trustedProxies: [IPNetwork]
}
