"""The console's pages with 100,000 users and 1,000,000 ledger entries (run by scripts/bench-lib/console-bench.sh).

seed: writes the data straight into a migrated, stopped database (SQLite: the file, in one transaction; PostgreSQL: COPY
through psql in one transaction, then VACUUM ANALYZE as autovacuum would; SQLite gets no ANALYZE, as the server runs
none). Deterministic (seeded random). 1,000,000 entries spread evenly over the last 7 days, newest ids newest: 3 heavy
users with 10,000 entries each, the rest at random over the other users (about 10 each). Each user's entries repeat a
block of 10: a credit of 100 (a `grant` - `signup`, `daily bonus`, 5% `console: goodwill` with their audit row - or,
a quarter of the later blocks, a `purchase` with its purchases row), debits of 1-9 named after actions (`reading`,
`tally.ai gpt-4o-mini`, ...), a `hold` of 5 then its `capture` (or `release`): balance_after/held_after run per user
and the wallet holds the last ones, so every constraint holds. Every 5th user has an email account; guests have an
installation; sessions for all (25 for the heavy users). Writes the targets (ids, emails, transaction ids) as JSON.

measure: signs in to the console once (the sign-in form's CSRF cookie and field, the key, the session cookie), times
the first overview (it reads the 7-day totals itself), warms up, then times N sequential requests on one keep-alive
connection per page, and 30 s of continuous overview reads (its numbers refresh in the background every 10 s).
Finds are the POST /console/find (303 to the user; the user page is timed apart). Exits 1 on any unexpected answer.
"""

import argparse, hashlib, html, http.client, json, math, os, random, re, sqlite3, subprocess, sys, time, urllib.parse, uuid
from array import array

USERS, ENTRIES, HEAVY, WEEK = 100_000, 1_000_000, 3, 7 * 86_400_000
ACTIONS = ["reading", "reading", "reading", "tally.ai gpt-4o-mini", "tally.ai gpt-4o-mini", "summary", "translate", "ocr", "export"]


def generate(now, rng, out):
    """Fills the tables through out(table, columns, rows) in foreign-key order; returns the targets."""
    owner = array("i", (j % 100 if j % 100 < HEAVY else rng.randrange(HEAVY, USERS) for j in range(ENTRIES)))
    count, first = [0] * USERS, [None] * USERS
    for j, u in enumerate(owner):
        count[u] += 1
        if first[u] is None:
            first[u] = j
    at = lambda j: now - WEEK + 60_000 + j * (WEEK - 120_000) // ENTRIES
    ids = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(USERS)]
    created = [(at(first[u]) if first[u] is not None else now - rng.randrange(WEEK)) - rng.randrange(30 * 86_400_000)
               for u in range(USERS)]
    email = lambda u: f"user{u}@example.com" if u % 5 == 1 else None
    guests = [u for u in range(USERS) if email(u) is None]
    out("installations", "id, created_at", ((hashlib.sha256(ids[u].encode()).hexdigest(), created[u]) for u in guests))
    out("users", "id, email, password_hash, email_verified_at, installation, created_at",
        ((ids[u], email(u), "$pbkdf2-sha256$bench" if email(u) else None, created[u] if email(u) and u % 2 else None,
          None if email(u) else hashlib.sha256(ids[u].encode()).hexdigest(), created[u]) for u in range(USERS)))
    out("sessions", "id, user_id, created_at, revoked_at",
        ((str(uuid.UUID(int=rng.getrandbits(128), version=4)), ids[u], created[u] + s * 3_600_000,
          created[u] + 60_000 if s == 0 and u % 5 == 0 else None)
         for u in range(USERS) for s in range(25 if u < HEAVY else 1 + (u % 5 == 0))))
    k, balance, held, purchases, audit = [0] * USERS, [0] * USERS, [0] * USERS, [], []

    def entries():
        for j, u in enumerate(owner):
            n, phase, t, reference, change = k[u], k[u] % 10, at(j), None, 0
            if phase == 0 and n and rng.random() < 0.25:
                reference = f"2000000{j:09d}"
                kind, amount, reason = "purchase", 100, f"{reference} com.example.tokens100"
                purchases.append((reference, reference, "com.example.tokens100", "consumable", 1, 100, "Production", ids[u], 1, t - 2000, t - 2000, t))
            elif phase == 0:
                kind, amount = "grant", 100
                reason = "signup" if n == 0 else "console: goodwill" if rng.random() < 0.05 else "daily bonus"
                if reason == "console: goodwill":
                    audit.append((t, f"console-{rng.getrandbits(32):08x}", "grant", ids[u], f"balance={balance[u]}", f"balance={balance[u] + 100} (+100: console: goodwill)"))
            elif phase == 5 and n < count[u] - 1:
                kind, amount, change, reason = "hold", 0, 5, "tally.ai gpt-4o-mini"
            elif phase == 6:
                kind, amount, change, reason = ("release", 0, -5, None) if n % 20 == 16 else ("capture", -rng.randint(1, 5), -5, "tally.ai gpt-4o-mini")
            else:
                kind, amount, reason = "debit", -rng.randint(1, 9), rng.choice(ACTIONS)
            k[u], balance[u], held[u] = n + 1, balance[u] + amount, held[u] + change
            yield (ids[u], kind, amount, change, balance[u], held[u], reason, t, reference)

    out("ledger_entries", "user_id, kind, amount, held_change, balance_after, held_after, reason, created_at, reference", entries())
    out("wallets", "user_id, balance, held, version", ((ids[u], balance[u], held[u], k[u]) for u in range(USERS)))
    out("purchases", "transaction_id, original_transaction_id, product_id, kind, quantity, tokens, environment, user_id, claimed, "
        "purchased_at, signed_at, recorded_at", purchases)
    out("console_audit", "at, operator_session, action, user_id, before, after", audit)
    some = rng.sample([u for u in range(HEAVY, USERS) if count[u]], 500)
    return {"heavy": ids[:HEAVY], "users": [ids[u] for u in some],
            "emails": [[email(u), ids[u]] for u in rng.sample(range(1, USERS, 5), 500)],
            "transactions": [[p[0], p[7]] for p in rng.sample(purchases, 500)], "audit": len(audit), "purchases": len(purchases)}


def seed(args):
    started, rng, now = time.time(), random.Random(20241126), int(time.time() * 1000)
    if args.store == "sqlite":
        db = sqlite3.connect(args.sqlite, isolation_level=None)
        db.execute("PRAGMA synchronous = OFF")
        db.execute("PRAGMA cache_size = -1000000")  # 1 GB: the indexes on random ids stay in memory
        db.execute("BEGIN")
        # The indexes are dropped and made again after the load (the same SQL): faster than inserting into them.
        indexes = db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL").fetchall()
        for name, _ in indexes:
            db.execute(f"DROP INDEX {name}")
        out = lambda table, columns, rows: db.executemany(
            f"INSERT INTO {table} ({columns}) VALUES ({', '.join('?' * (columns.count(',') + 1))})", rows)
        targets = generate(now, rng, out)
        for _, sql in indexes:
            db.execute(sql)
        db.execute("COMMIT")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.close()
    else:
        psql = subprocess.Popen([args.psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", args.url], stdin=subprocess.PIPE, text=True)
        field = lambda v: "\\N" if v is None else ("t" if v is True else str(v))

        def out(table, columns, rows):
            psql.stdin.write(f"COPY {table} ({columns}) FROM STDIN;\n")
            batch = []
            for row in rows:
                batch.append("\t".join(map(field, row)))
                if len(batch) == 20_000:
                    psql.stdin.write("\n".join(batch) + "\n"); batch = []
            psql.stdin.write("".join(line + "\n" for line in batch) + "\\.\n")

        psql.stdin.write("BEGIN;\n")
        targets = generate(now, rng, lambda t, c, rows: out(t, c, ((*r[:8], r[8] == 1, *r[9:]) if t == "purchases" else r for r in rows)))
        psql.stdin.write("COMMIT;\nVACUUM ANALYZE installations, users, sessions, ledger_entries, wallets, purchases, console_audit;\n")
        psql.stdin.close()
        if psql.wait() != 0:
            sys.exit("seed: psql failed")
    targets["seconds"] = round(time.time() - started, 1)
    json.dump(targets, open(args.targets, "w"))
    print(f"seeded {USERS:,} users, {ENTRIES:,} entries, {targets['purchases']:,} purchases, {targets['audit']:,} audit rows "
          f"in {targets['seconds']} s", file=sys.stderr)


class Console:
    """One keep-alive connection to the admin listener, with the console's cookies."""

    def __init__(self, url):
        parts = urllib.parse.urlsplit(url)
        self.connection, self.cookies = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120), {}

    def send(self, method, path, form=None, expect=200, location=None):
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        if form is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        start = time.perf_counter()
        self.connection.request(method, path, body=form and urllib.parse.urlencode(form), headers=headers)
        response = self.connection.getresponse()
        body = response.read().decode()
        elapsed = (time.perf_counter() - start) * 1000
        for cookie in response.headers.get_all("Set-Cookie") or []:
            name, value = cookie.split(";")[0].split("=", 1)
            self.cookies[name] = value
        where = response.getheader("Location")
        if response.status != expect or (location and where != location):
            sys.exit(f"{method} {path}: {response.status} {where or ''} (expected {expect} {location or ''})\n{body[:500]}")
        return body, elapsed


def quantile(sorted_ms, q):  # nearest rank
    return sorted_ms[max(0, math.ceil(len(sorted_ms) * q) - 1)]


def measure(args):
    targets, load = json.load(open(args.targets)), os.getloadavg()
    console, n = Console(args.admin), args.requests
    form = console.send("GET", "/console/sign-in")[0]
    csrf = lambda page: re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    console.send("POST", "/console/sign-in", {"csrf": csrf(form), "key": args.key}, expect=303, location="/")
    overview, first_ms = console.send("GET", "/")
    session_csrf = csrf(overview)
    older = lambda page: html.unescape(re.search(r'<a rel="next" href="([^"]+)"', page).group(1))
    heavy = targets["heavy"][0]
    deep = f"/console/users/{heavy}"
    for _ in range(args.depth):  # follows the page's own "Older" link
        deep = older(console.send("GET", deep)[0])
    find = lambda pairs: lambda i: ("POST", "/console/find", {"csrf": session_csrf, "q": pairs[i % len(pairs)][0]}, 303,
                                    f"/console/users/{pairs[i % len(pairs)][1]}")
    get = lambda path: lambda i: ("GET", path, None, 200, None)
    pages = [("overview `/`", get("/")), ("newest users", get("/console/users")),
             ("users, next page", get(older(console.send("GET", "/console/users")[0]))),
             ("heavy user (10,000 entries)", get(f"/console/users/{heavy}")),
             (f"heavy user, ledger page {args.depth + 1}", get(deep)),
             ("random users", lambda i: ("GET", f"/console/users/{targets['users'][i % len(targets['users'])]}", None, 200, None)),
             ("find by email (POST, 303)", find(targets["emails"])), ("find by transaction id (POST, 303)", find(targets["transactions"])),
             ("audit", get("/console/audit"))]
    rows = [("first overview (cold numbers)", [first_ms])]
    for label, make in pages:
        for i in range(args.warmup):
            console.send(*make(i + 7919))
        rows.append((label, sorted(console.send(*make(i))[1] for i in range(n))))
        print(f"  {label}: done", file=sys.stderr)
    times, end = [], time.time() + args.seconds
    while time.time() < end:
        times.append(console.send("GET", "/")[1])
    rows.append((f"overview, {args.seconds:.0f} s continuous", sorted(times)))
    print(f"\n{args.label}: load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; seeding took {targets['seconds']} s\n")
    print("| page | requests | p50 ms | p99 ms | max ms | ≤ 50 ms p99? |\n| --- | ---: | ---: | ---: | ---: | --- |")
    for label, ms in rows:
        p99 = quantile(ms, 0.99)
        print(f"| {label} | {len(ms)} | {quantile(ms, 0.5):.1f} | {p99:.1f} | {ms[-1]:.1f} | {'yes' if p99 <= 50 else 'NO'} |")
    load = os.getloadavg()
    print(f"\nload average at end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("seed")
    s.add_argument("--store", choices=["sqlite", "postgres"], required=True)
    s.add_argument("--sqlite", help="the database file (SQLite)")
    s.add_argument("--psql", default="psql")
    s.add_argument("--url", help="the database URL (PostgreSQL)")
    s.add_argument("--targets", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--admin", required=True)
    m.add_argument("--key", required=True)
    m.add_argument("--targets", required=True)
    m.add_argument("--label", default="console")
    m.add_argument("--requests", type=int, default=300)
    m.add_argument("--warmup", type=int, default=20)
    m.add_argument("--depth", type=int, default=100, help="how many 'Older' links to follow to the deep ledger page")
    m.add_argument("--seconds", type=float, default=30)
    args = parser.parse_args()
    seed(args) if args.command == "seed" else measure(args)
