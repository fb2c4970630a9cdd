import Mustache

/// The console's pages as Mustache templates (swift-mustache escapes every `{{value}}` for HTML; the only unescaped
/// value, `{{{content}}}`, is a page this library rendered). No template has a script, an inline style or an event
/// attribute: the Content-Security-Policy allows none.
enum ConsoleTemplates {
    /// The library of every page, built once.
    static let library: MustacheLibrary = {
        var library = MustacheLibrary()
        for (name, text) in pages {
            // The templates are constants of this file: a parse error is a bug caught by the first test that renders.
            library.register(try! MustacheTemplate(string: text), named: name)
        }
        return library
    }()

    static let pages: [(String, String)] = [
        ("layout", layout), ("sign-in", signIn), ("overview", overview), ("users", users), ("user", user), ("audit", audit),
        ("message", message), ("confirm", confirm), ("purchase", purchase),
    ]

    static let layout = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="no-referrer">
        <title>{{title}} · Tally console</title>
        <link rel="stylesheet" href="/console/console.css">
        </head>
        <body>
        <header>
        <a class="brand" href="/">Tally console</a>
        {{#signedIn}}
        <nav aria-label="Console">
        <a href="/">Overview</a>
        <a href="/console/users">Users</a>
        <a href="/console/audit">Audit</a>
        <form method="post" action="/console/sign-out" class="inline"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit">Sign out</button></form>
        </nav>
        {{/signedIn}}
        </header>
        <main>
        {{#notice}}<p class="notice" role="status">{{notice}}</p>{{/notice}}
        {{{content}}}
        </main>
        <footer>Times in UTC{{#zone}}; the user's zone beside them{{/zone}}. Not for the public internet.</footer>
        </body>
        </html>
        """

    static let signIn = """
        <h1>Sign in</h1>
        <form method="post" action="/console/sign-in" class="card narrow">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <label for="key">Admin key</label>
        <input id="key" name="key" type="password" autocomplete="current-password" required autofocus>
        <button type="submit">Sign in</button>
        </form>
        """

    static let findForm = """
        <form method="post" action="/console/find" class="card find" role="search">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <label for="q">Find a user</label>
        <div class="row"><input id="q" name="q" required placeholder="user id, email, transaction id or device hash">
        <button type="submit">Find</button></div>
        </form>
        """

    static let overview = """
        <h1>Overview</h1>
        \(findForm)
        <section class="grid">
        <div class="card stat"><h2>Users</h2><p class="big">{{users.total}}</p><p>{{users.guests}} · {{users.accounts}}</p><p class="muted">counted at {{users.countedAt}}</p></div>
        <div class="card stat"><h2>New users</h2><p class="big">{{today.newUsers}}</p><p>today · {{week.newUsers}} in 7 days</p></div>
        <div class="card stat"><h2>Database</h2><p class="big {{database.css}}">{{database.status}}</p><p>{{database.kind}} · answered in {{database.millis}} ms</p></div>
        </section>
        <section class="card">
        <h2>Tokens</h2>
        <div class="scroll"><table>
        <thead><tr><th>kind</th><th class="num">today (UTC)</th><th class="num">entries</th><th class="num">7 days</th><th class="num">entries</th></tr></thead>
        <tbody>{{#tokens}}<tr><td>{{label}}</td><td class="num">{{today}}</td><td class="num">{{todayEntries}}</td><td class="num">{{week}}</td><td class="num">{{weekEntries}}</td></tr>{{/tokens}}</tbody>
        </table></div>
        {{{tokensChart}}}
        </section>
        <section class="card">
        <h2>Spending by action and AI model (7 days)</h2>
        {{^reasons}}<p class="muted">Nothing spent in the last 7 days.</p>{{/reasons}}
        {{#hasReasons}}<div class="scroll"><table><thead><tr><th>action or AI model</th><th class="num">calls</th><th class="num">tokens</th></tr></thead>
        <tbody>{{#reasons}}<tr><td>{{reason}}</td><td class="num">{{entries}}</td><td class="num">{{tokens}}</td></tr>{{/reasons}}</tbody></table></div>
        {{{reasonsChart}}}{{/hasReasons}}
        </section>
        <section class="card">
        <h2>This process, last hour</h2>
        <p class="muted">10-second samples of this server process (not the others on the database), from its request metrics.</p>
        <div class="charts">{{#charts}}<figure><figcaption>{{title}} <span class="muted">now {{latest}}</span></figcaption>{{{svg}}}</figure>{{/charts}}</div>
        </section>
        """

    static let users = """
        <h1>Users</h1>
        \(findForm)
        <section class="card">
        <h2>Newest users</h2>
        <div class="scroll"><table>
        <thead><tr><th>user</th><th>kind</th><th>created</th><th>premium</th></tr></thead>
        <tbody>{{#rows}}<tr><td><a href="/console/users/{{id}}">{{label}}</a></td><td>{{kind}}</td><td>{{created}}</td><td>{{premium}}</td></tr>{{/rows}}</tbody>
        </table></div>
        <p class="pager">{{#first}}<a href="/console/users">Newest</a>{{/first}} {{#next}}<a rel="next" href="/console/users?after={{next}}">Older →</a>{{/next}}</p>
        </section>
        """

    static let user = """
        <h1>{{profile.label}}</h1>
        <section class="grid">
        <div class="card"><h2>Profile</h2><dl>
        <dt>id</dt><dd><code>{{profile.id}}</code></dd>
        <dt>kind</dt><dd>{{profile.kind}}</dd>
        <dt>email</dt><dd>{{profile.email}}</dd>
        <dt>time zone</dt><dd>{{profile.timezone}}</dd>
        <dt>created</dt><dd>{{profile.created}}</dd>
        {{#profile.installation}}<dt>installation</dt><dd><code>{{profile.installation}}</code></dd>{{/profile.installation}}
        {{#profile.appAttest}}<dt>App Attest</dt><dd>{{profile.appAttest}}</dd>{{/profile.appAttest}}
        {{#profile.unattested}}<dt>unattested spends</dt><dd class="flag">{{profile.unattested}}</dd>{{/profile.unattested}}
        {{#profile.mergedInto}}<dt>merged into</dt><dd><a href="/console/users/{{profile.mergedInto}}">{{profile.mergedInto}}</a></dd>{{/profile.mergedInto}}
        <dt>premium until</dt><dd id="premium">{{profile.premium}}</dd>
        </dl></div>
        <div class="card"><h2>Wallet</h2><p class="big" id="balance">{{wallet.balance}}</p><p>{{wallet.held}} held · {{wallet.available}} available</p></div>
        <div class="card"><h2>Quotas today</h2>{{^quotas}}<p class="muted">No quotas.</p>{{/quotas}}<ul class="plain">{{#quotas}}<li>{{name}}: {{used}} of {{limit}} · resets {{resets}}</li>{{/quotas}}</ul></div>
        </section>

        <section class="card actions">
        <h2>Act</h2>
        <div class="grid">
        <form method="post" action="/console/users/{{profile.id}}/grant" class="stack">
        <h3>Grant tokens</h3>
        <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="idempotency" value="{{idempotency}}">
        <label for="amount">Tokens</label><input id="amount" name="amount" type="number" min="1" required>
        <label for="reason">Reason (the user may see it)</label><input id="reason" name="reason" maxlength="200" required>
        <label class="check"><input type="checkbox" name="confirm" value="yes" required> I mean it</label>
        <button type="submit">Grant</button>
        </form>
        <form method="post" action="/console/users/{{profile.id}}/premium" class="stack">
        <h3>Premium</h3>
        <input type="hidden" name="csrf" value="{{csrf}}">
        <label for="until">Until (UTC day)</label><input id="until" name="until" type="date">
        <label class="check"><input type="checkbox" name="confirm" value="yes" required> I mean it</label>
        <button type="submit" name="op" value="set">Set premium</button>
        <button type="submit" name="op" value="end" class="secondary">End premium</button>
        </form>
        <form method="post" action="/console/users/{{profile.id}}/revoke-sessions" class="stack">
        <h3>Sessions</h3>
        <input type="hidden" name="csrf" value="{{csrf}}">
        <p>Signs the user out on every device.</p>
        <label class="check"><input type="checkbox" name="confirm" value="yes" required> I mean it</label>
        <button type="submit">Revoke all sessions</button>
        </form>
        <form method="post" action="/console/users/{{profile.id}}/delete" class="stack danger">
        <h3>Delete account</h3>
        <input type="hidden" name="csrf" value="{{csrf}}">
        <label for="typed">Type the user id to delete everything of theirs</label><input id="typed" name="typed" autocomplete="off" required>
        <button type="submit">Delete account</button>
        </form>
        </div>
        </section>

        <section class="card">
        <h2>Ledger</h2>
        <div class="scroll"><table id="ledger">
        <thead><tr><th class="num">entry</th><th>when</th><th>kind</th><th class="num">amount</th><th class="num">held</th><th class="num">balance</th><th>reason</th></tr></thead>
        <tbody>{{#entries}}<tr{{#sandbox}} class="sandbox"{{/sandbox}}><td class="num">{{id}}</td><td>{{when}}</td><td>{{kind}}</td><td class="num">{{amount}}</td><td class="num">{{held}}</td><td class="num">{{balance}}</td><td>{{reason}}</td></tr>{{/entries}}</tbody>
        </table></div>
        <p class="pager">{{#ledgerFirst}}<a href="/console/users/{{profile.id}}">Newest</a>{{/ledgerFirst}} {{#ledgerNext}}<a rel="next" href="/console/users/{{profile.id}}?before={{ledgerNext}}">Older →</a>{{/ledgerNext}}</p>
        </section>

        <section class="grid">
        <div class="card"><h2>Open holds</h2>{{^holds}}<p class="muted">None.</p>{{/holds}}<ul class="plain">{{#holds}}<li><code>{{id}}</code> {{amount}} until {{expires}}</li>{{/holds}}</ul></div>
        <div class="card"><h2>Sessions</h2>{{^sessions}}<p class="muted">None.</p>{{/sessions}}<ul class="plain">{{#sessions}}<li>{{created}} · {{state}}</li>{{/sessions}}</ul></div>
        <div class="card"><h2>Collections</h2>{{^collections}}<p class="muted">None.</p>{{/collections}}<ul class="plain">{{#collections}}<li>{{collection}}: {{documents}}, {{bytes}}, last change {{lastChange}}</li>{{/collections}}</ul></div>
        </section>
        <section class="card">
        <h2>Purchases</h2>{{^purchases}}<p class="muted">None.</p>{{/purchases}}
        {{#hasPurchases}}<div class="scroll"><table><thead><tr><th>transaction</th><th>product</th><th>environment</th><th>bought</th><th>status</th><th>premium until</th><th class="num">tokens</th></tr></thead>
        <tbody>{{#purchases}}<tr{{#sandbox}} class="sandbox"{{/sandbox}}><td><a href="/console/purchases/{{transactionId}}"><code>{{transactionId}}</code></a></td><td>{{productId}}</td><td>{{environment}}</td><td>{{bought}}</td><td>{{status}}</td><td>{{until}}</td><td class="num">{{tokens}}</td></tr>{{/purchases}}</tbody></table></div>{{/hasPurchases}}
        <p class="muted">Sandbox rows (App Review's and testers' purchases, which cost nothing) are shown apart, in italics.</p>
        </section>
        """

    static let purchase = """
        <h1>Purchase <code>{{transactionId}}</code></h1>
        <section class="card">
        <dl><dt>Account</dt><dd><a href="/console/users/{{userId}}">{{user}}</a></dd><dt>Product</dt><dd>{{product}}</dd>
        <dt>Environment</dt><dd>{{environment}}</dd><dt>Bought</dt><dd>{{bought}}</dd><dt>Status</dt><dd id="status">{{status}}</dd>
        <dt>Spent</dt><dd id="spent">{{spent}}{{^spent}}–{{/spent}}</dd><dt>Refunded unspent</dt><dd>{{refunded}}{{^refunded}}–{{/refunded}}</dd></dl>
        <p class="muted">Spent is counted first bought, first spent, after grants: what Tally tells Apple when the customer asks for a refund.</p>
        </section>
        <section class="card">
        <h2>Ledger</h2>
        <div class="scroll"><table id="purchase-ledger"><thead><tr><th>when</th><th>kind</th><th class="num">amount</th><th>reason</th></tr></thead>
        <tbody>{{#entries}}<tr><td>{{when}}</td><td>{{kind}}</td><td class="num">{{amount}}</td><td>{{reason}}</td></tr>{{/entries}}</tbody></table></div>
        </section>
        <section class="card">
        <h2>Refund requests</h2>{{^hasRequests}}<p class="muted">Apple has asked nothing about this purchase.</p>{{/hasRequests}}
        {{#hasRequests}}<div class="scroll"><table id="consumption-requests"><thead><tr><th>asked</th><th>reason</th><th>answer</th><th class="num">attempts</th><th>sent</th><th>what was sent</th><th>Apple decided</th></tr></thead>
        <tbody>{{#requests}}<tr><td>{{requested}}</td><td>{{reason}}</td><td class="request-status">{{status}}{{#error}}<br><span class="muted">{{error}}</span>{{/error}}</td><td class="num">{{attempts}}</td><td>{{answered}}</td><td class="answer">{{answer}}</td><td>{{decision}}</td></tr>{{/requests}}</tbody></table></div>{{/hasRequests}}
        </section>
        """

    static let audit = """
        <h1>Audit log</h1>
        <section class="card">
        <p class="muted">Every action taken in this console or through the admin API, append-only. Also <code>GET /admin/v1/audit</code>.</p>
        <div class="scroll"><table id="audit">
        <thead><tr><th class="num">#</th><th>when</th><th>operator</th><th>action</th><th>user</th><th>before</th><th>after</th></tr></thead>
        <tbody>{{#rows}}<tr><td class="num">{{id}}</td><td>{{when}}</td><td><code>{{operator}}</code></td><td>{{action}}</td><td>{{#userId}}<a href="/console/users/{{userId}}">{{userId}}</a>{{/userId}}</td><td>{{before}}</td><td>{{after}}</td></tr>{{/rows}}</tbody>
        </table></div>
        <p class="pager">{{#first}}<a href="/console/audit">Newest</a>{{/first}} {{#next}}<a rel="next" href="/console/audit?before={{next}}">Older →</a>{{/next}}</p>
        </section>
        """

    static let message = """
        <h1>{{heading}}</h1>
        <section class="card"><p>{{text}}</p>{{#back}}<p><a href="{{back}}">Back</a></p>{{/back}}</section>
        """

    static let confirm = """
        <h1>{{heading}}</h1>
        <section class="card"><p>{{text}}</p><p><a href="{{back}}">Back to the user</a></p></section>
        """

    /// The one stylesheet (`/console/console.css`): readable at 360 px, tables scroll sideways inside their card.
    static let css = """
        :root{color-scheme:light dark;--fg:#1b1f24;--bg:#f6f7f9;--card:#fff;--line:#d8dde3;--accent:#2457c5;--muted:#66707a;--bad:#b3261e;--good:#1b7f3b}
        @media (prefers-color-scheme:dark){:root{--fg:#e6e8eb;--bg:#14171a;--card:#1d2125;--line:#343a40;--accent:#7aa2ff;--muted:#9aa4ae}}
        *{box-sizing:border-box}body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
        header{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:center;padding:.6rem 1rem;background:var(--card);border-bottom:1px solid var(--line)}
        header nav{display:flex;flex-wrap:wrap;gap:.25rem .9rem;align-items:center}a{color:var(--accent)}.brand{font-weight:600;text-decoration:none}
        main{max-width:1100px;margin:0 auto;padding:1rem}footer{max-width:1100px;margin:0 auto;padding:0 1rem 2rem;color:var(--muted);font-size:.85rem}
        h1{font-size:1.4rem;margin:.4rem 0 1rem;overflow-wrap:anywhere}h2{font-size:1.05rem;margin:0 0 .6rem}h3{font-size:1rem;margin:0 0 .4rem}
        .card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:1rem;margin:0 0 1rem;min-width:0}
        .grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(240px,1fr));gap:1rem}.grid>.card{margin:0}section.grid{margin-bottom:1rem}
        .big{font-size:1.8rem;font-weight:600;margin:.2rem 0}.muted{color:var(--muted)}.ok{color:var(--good)}.bad{color:var(--bad)}
        .scroll{overflow-x:auto}table{border-collapse:collapse;width:100%;font-size:.9rem}th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid var(--line);white-space:nowrap}
        td:last-child{white-space:normal}.num{text-align:right;font-variant-numeric:tabular-nums}tr.sandbox td{font-style:italic;color:var(--muted)}
        label{display:block;margin:.4rem 0 .2rem;font-weight:500}label.check{font-weight:400}
        input{font:inherit;padding:.45rem .5rem;border:1px solid var(--line);border-radius:6px;background:var(--bg);color:var(--fg);max-width:100%}
        input:not([type=checkbox]){width:100%}
        button{font:inherit;padding:.45rem .9rem;border-radius:6px;border:1px solid var(--accent);background:var(--accent);color:#fff;cursor:pointer;margin-top:.5rem}
        button.secondary,header button{background:transparent;color:var(--accent)}header button{margin:0;padding:.2rem .6rem}
        .danger button{background:var(--bad);border-color:var(--bad)}button:focus-visible,a:focus-visible,input:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
        .row{display:flex;gap:.5rem}.row input{flex:1}.row button{margin-top:0}.narrow{max-width:420px}.inline{display:inline}
        .notice{background:var(--card);border-left:4px solid var(--accent);padding:.6rem .8rem}
        dl{display:grid;grid-template-columns:auto 1fr;gap:.2rem .8rem;margin:0}dt{color:var(--muted)}dd{margin:0;overflow-wrap:anywhere}
        ul.plain{list-style:none;padding:0;margin:0}ul.plain li{padding:.2rem 0;border-bottom:1px solid var(--line);overflow-wrap:anywhere}
        .charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));gap:1rem}figure{margin:0}figcaption{font-weight:500;margin-bottom:.3rem}
        svg{width:100%;height:auto;display:block}svg.bars{max-width:520px;margin-top:.8rem}svg .line{stroke-linecap:round}svg .bar{fill:var(--accent)}svg .bar2{fill:var(--muted)}svg .line{fill:none;stroke:var(--accent);stroke-width:1.5}
        svg .axis{stroke:var(--line)}svg text{fill:var(--muted);font-size:10px}
        .pager{display:flex;gap:1rem}code{font-size:.85em;overflow-wrap:anywhere}
        """
}
