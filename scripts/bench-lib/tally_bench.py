#!/usr/bin/env python3
"""Helpers of scripts/bench (standard library only).

  seed   create USERS guest accounts through the API, grant each a balance, write tokens and ids
  redeem POST /v1/purchases/apple the first COUNT transactions of a `tally-dev bench-purchases sign` file (each must be
         credited: the replay set)
  books  check every wallet through the admin API and compare the debited tokens with the server's
         own count of successful POST /v1/actions/{name} replies (from /metrics); with --purchases, also
         every purchase against the user's ledger (purchase_bench.check_user)
  (the admin API and /metrics are on the server's admin listener, --admin-port)
  report aggregate the runs (median per case) and print the Markdown report
"""
import argparse
import http.client
import json
import os
import re
import secrets
import statistics
import sys
import threading
import time

import purchase_bench
import sync_bench


# ---------------------------------------------------------------- HTTP

class Client:
    """One keep-alive connection to the server; reconnects once on a dropped connection."""

    def __init__(self, port, timeout=30):
        self.port = port
        self.timeout = timeout
        self.conn = None

    def request(self, method, path, body=None, headers=None):
        data = None if body is None else json.dumps(body).encode()
        hdrs = dict(headers or {})
        if data is not None:
            hdrs["Content-Type"] = "application/json"
        for attempt in (1, 2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
                self.conn.request(method, path, body=data, headers=hdrs)
                resp = self.conn.getresponse()
                text = resp.read()
                return resp.status, text
            except (http.client.HTTPException, ConnectionError, OSError):
                if self.conn is not None:
                    self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


def parallel(count, workers, work):
    """Runs work(client, admin, index) for index in range(count) on `workers` threads, each with a
    connection to the API and one to the admin listener; re-raises the first error."""
    lock = threading.Lock()
    state = {"next": 0, "error": None}

    def loop(client, admin):
        while True:
            with lock:
                if state["error"] is not None or state["next"] >= count:
                    return
                index = state["next"]
                state["next"] += 1
            try:
                work(client, admin, index)
            except BaseException as error:  # noqa: BLE001 - reported by the caller
                with lock:
                    if state["error"] is None:
                        state["error"] = error
                return

    threads = [threading.Thread(target=loop, args=(Client(ARGS.port), Client(ARGS.admin_port)), daemon=True)
               for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if state["error"] is not None:
        raise state["error"]


# ---------------------------------------------------------------- seed

def seed(args):
    admin = {"Authorization": "Bearer " + args.admin_key}
    users = [None] * args.users
    started = time.monotonic()

    def one(client, admin_client, index):
        device = "bench-" + secrets.token_hex(16)
        status, text = client.request("POST", "/v1/auth/guest", {"deviceId": device})
        if status not in (200, 201):
            raise RuntimeError(f"POST /v1/auth/guest answered {status}: {text[:300]!r}")
        reply = json.loads(text)
        user_id, token = reply["userId"], reply["accessToken"]
        status, text = admin_client.request(
            "POST", f"/admin/v1/users/{user_id}/grants", {"amount": args.grant, "reason": "benchmark balance"}, admin)
        if status not in (200, 201):
            raise RuntimeError(f"POST /admin/v1/users/{{id}}/grants answered {status}: {text[:300]!r}")
        balance = json.loads(text)["wallet"]["balance"]
        if balance < args.grant:
            raise RuntimeError(f"granted {args.grant} but the wallet shows {balance}")
        users[index] = (user_id, token)

    parallel(args.users, args.workers, one)
    with open(args.tokens, "w") as out:
        out.writelines(token + "\n" for _, token in users)
    with open(args.ids, "w") as out:
        out.writelines(user_id + "\n" for user_id, _ in users)
    print(f"seeded {args.users} users in {time.monotonic() - started:.1f} s", file=sys.stderr)


# ---------------------------------------------------------------- books

METRIC = re.compile(r'^tally_http_requests_total\{(.*)\}\s+([0-9.eE+]+)\s*$')


def action_replies(port, route="/v1/actions/"):
    """Counts of POST replies to routes containing `route` (POST /v1/actions/{name} by default) by status class, as
    the server itself counted them."""
    status, text = Client(port).request("GET", "/metrics")
    if status != 200:
        raise RuntimeError(f"GET /metrics answered {status}")
    ok = other = 0
    for line in text.decode().splitlines():
        match = METRIC.match(line)
        if not match:
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(1)))
        if labels.get("method") != "POST" or route not in labels.get("route", ""):
            continue
        value = int(float(match.group(2)))
        if labels.get("status", "").startswith("2"):
            ok += value
        else:
            other += value
    return ok, other


def settled_replies(port):
    """The action and purchase reply counts."""
    return action_replies(port), action_replies(port, "/v1/purchases/apple")


def settled_action_replies(port, quiet=2.0, limit=120.0):
    """The action (and purchase) reply counts once they stop changing for `quiet` seconds: requests whose client
    (wrk) has gone away are still finished by the server, so the books are read only after that."""
    deadline = time.monotonic() + limit
    previous = settled_replies(port)
    while True:
        time.sleep(quiet)
        current = settled_replies(port)
        if current == previous:
            return current
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server was still answering POST /v1/actions after {limit:.0f} s")
        previous = current


def books(args):
    admin = {"Authorization": "Bearer " + args.admin_key}
    with open(args.ids) as handle:
        ids = [line.strip() for line in handle if line.strip()]
    wallets = [None] * len(ids)
    checked = [None] * len(ids)
    owner_of = {tid: user for user, tid, _, _ in purchase_bench.read_signed(args.purchases)} if args.purchases else {}

    def pages(admin_client, path):
        items, cursor = [], None
        while True:
            status, text = admin_client.request("GET", path + (f"&cursor={cursor}" if cursor else ""), headers=admin)
            if status != 200:
                raise RuntimeError(f"GET {path.split('?')[0]} answered {status}: {text[:300]!r}")
            page = json.loads(text)
            items.extend(page["items"])
            cursor = page.get("nextCursor")
            if not cursor:
                return items

    def one(client, admin_client, index):
        status, text = admin_client.request("GET", f"/admin/v1/users/{ids[index]}", headers=admin)
        if status != 200:
            raise RuntimeError(f"GET /admin/v1/users/{{id}} answered {status}: {text[:300]!r}")
        wallets[index] = json.loads(text)["wallet"]
        if args.purchases:
            entries = pages(admin_client, f"/admin/v1/users/{ids[index]}/entries?limit=100")
            listed = pages(admin_client, f"/admin/v1/users/{ids[index]}/purchases?limit=100")
            problems, tokens = purchase_bench.check_user(ids[index], wallets[index], entries, listed, owner_of)
            checked[index] = (problems, tokens, len(listed))

    for attempt in range(5):
        before = settled_action_replies(args.admin_port)
        parallel(len(ids), args.workers, one)
        after = settled_replies(args.admin_port)
        if after == before:
            break
    ok, other = after[0]
    negative = sum(1 for w in wallets if w["balance"] < 0 or w["available"] < 0)
    held = sum(w["held"] for w in wallets)
    purchased = sum(c[1] for c in checked) if args.purchases else 0
    debited = sum(args.grant + args.signup_grant - w["balance"] for w in wallets) + purchased
    result = {
        "users": len(ids), "negative": negative, "held": held, "debited": debited,
        "actions_2xx": ok, "actions_other": other, "wrk_posts": args.wrk_posts,
        "ok": negative == 0 and held == 0 and debited == ok,
    }
    if args.purchases:
        result.update(purchase_bench.purchase_books(checked, args.purchase_min, args.purchase_max))
        result["purchases_2xx"], result["purchases_other"] = after[1]
        result["ok"] = result["ok"] and result["purchases_ok"]
    print(json.dumps(result))


# ---------------------------------------------------------------- redeem

def redeem(args):
    """Redeems the first COUNT signed transactions, each by its own user; each must answer a credited purchase."""
    signed = purchase_bench.read_signed(args.purchases, args.count)
    started = time.monotonic()

    def one(client, _admin, index):
        user_id, transaction_id, token, jws = signed[index]
        status, text = client.request("POST", "/v1/purchases/apple", {"signedTransaction": jws},
                                      {"Authorization": "Bearer " + token})
        if status != 200:
            raise RuntimeError(f"POST /v1/purchases/apple answered {status}: {text[:300]!r}")
        purchase = json.loads(text)["purchase"]
        if purchase["transactionId"] != transaction_id or purchase["status"] != "credited" \
                or purchase["tokens"] != purchase_bench.TOKENS_PER_PURCHASE:
            raise RuntimeError(f"POST /v1/purchases/apple answered {purchase}")

    parallel(len(signed), args.workers, one)
    print(f"redeemed {len(signed)} transactions in {time.monotonic() - started:.1f} s", file=sys.stderr)


# ---------------------------------------------------------------- report

def median(values):
    return statistics.median(values) if values else None


def read_rows(path):
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as handle:
        for line in handle:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 9:
                continue
            run, store, kind, conns, rps, p50, p99, errors, requests = parts[:9]
            rows.append({
                "run": int(run), "store": store, "kind": kind, "conns": int(conns), "rps": float(rps),
                "p50": float(p50), "p99": float(p99), "errors": int(errors), "requests": int(requests),
                "ran_out": int(parts[9]) if len(parts) > 9 and parts[9] else 0})
    return rows


def read_ceilings(path):
    """The ceilings table rows as {case: (rate, p50, p99, errors)}, plus the whole report text."""
    if not path or not os.path.exists(path):
        return {}, ""
    text = open(path).read()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] not in ("case", "") and not cells[0].startswith("---"):
            try:
                rows[cells[0]] = tuple(float(c) for c in cells[1:])
            except ValueError:
                pass
    return rows, text


def find_ceiling(rows, *patterns):
    for case, values in rows.items():
        if all(re.search(p, case) for p in patterns):
            return case, values[0]
    return None, None


STORE_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
KIND_NAMES = {"wallet": "GET /v1/wallet", "action": "POST /v1/actions/bench.debit",
              "purchase-new": "POST /v1/purchases/apple (new transactions)",
              "purchase-replay": "POST /v1/purchases/apple (replays)"}
PURCHASE_CASES = [(s, k, 64) for s in ("sqlite", "postgres") for k in ("purchase-new", "purchase-replay")]


def fmt_ratio(numerator, denominator, label):
    if numerator is None or not denominator:
        return None
    return f"{numerator / denominator:.2f}× {label}"


def report(args):
    meta = json.load(open(args.meta))
    rows = read_rows(args.rows)
    ceilings, ceilings_text = read_ceilings(args.ceilings)
    books_lines = []
    if os.path.exists(args.books):
        with open(args.books) as handle:
            for line in handle:
                run, store, data = line.rstrip("\n").split("\t", 2)
                books_lines.append((int(run), store, json.loads(data)))

    runs = sorted({r["run"] for r in rows})
    cases = {}
    for r in rows:
        cases.setdefault((r["store"], r["kind"], r["conns"]), []).append(r)

    def agg(store, kind, conns):
        items = cases.get((store, kind, conns))
        if not items:
            return None
        return {
            "rps": median([i["rps"] for i in items]), "p50": median([i["p50"] for i in items]),
            "p99": median([i["p99"] for i in items]), "errors": sum(i["errors"] for i in items),
            "runs": {i["run"]: i["rps"] for i in items}, "ran_out": sum(i["ran_out"] for i in items),
        }

    health = {c: find_ceiling(ceilings, r"GET /health", rf"\b{c} conn") for c in (64, 256)}
    sqlite_debit = find_ceiling(ceilings, r"POST /debit SQLite")
    pgbench_prepared = find_ceiling(ceilings, r"pgbench", r"-M prepared")
    pgbench_simple = find_ceiling(ceilings, r"pgbench", r"-M simple")

    order = [(s, k, c) for s in ("sqlite", "postgres") for k in ("wallet", "action") for c in (64, 256)]
    table = []
    values = {}
    extra = (("range", 64), ("push", 16), ("purchase-new", 64), ("purchase-replay", 64))
    for store, kind, conns in order + [(s, k, c) for s in ("sqlite", "postgres") for k, c in extra]:
        a = agg(store, kind, conns)
        if a is None:
            continue
        values[(store, kind, conns)] = a
    sync_lines = []
    if args.sync and os.path.exists(args.sync):
        with open(args.sync) as handle:
            for line in handle:
                run, store, kind, data = line.rstrip("\n").split("\t", 3)
                sync_lines.append((int(run), store, kind, json.loads(data)))
    for store, kind, conns in order:
        a = values.get((store, kind, conns))
        if a is None:
            continue
        ratios = []
        if kind == "wallet":
            ratios.append(fmt_ratio(a["rps"], health[conns][1], f"bare /health {conns} conn"))
        elif store == "postgres":
            ratios.append(fmt_ratio(a["rps"], pgbench_prepared[1], "pgbench -M prepared"))
            ratios.append(fmt_ratio(a["rps"], pgbench_simple[1], "pgbench -M simple"))
        else:
            pg = values.get(("postgres", "action", conns))
            ratios.append(fmt_ratio(a["rps"], pg["rps"] if pg else None, f"Tally PostgreSQL POST {conns} conn"))
            ratios.append(fmt_ratio(a["rps"], sqlite_debit[1], "ceiling SQLite debit 64 conn"))
        ratio = "; ".join(r for r in ratios if r) or "n/a"
        name = f"{KIND_NAMES[kind]}, {STORE_NAMES[store]}, {conns} conn"
        table.append(f"| {name} | {a['rps']:.0f} | {a['p50']:.2f} | {a['p99']:.2f} | {a['errors']} | {ratio} |")

    # ------------------------------------------------------------ targets
    def verdict(ok):
        return "**met**" if ok else "**NOT met**"

    targets = []
    w = values.get(("sqlite", "wallet", 256))
    h = health[256][1]
    if w and h:
        r = w["rps"] / h
        targets.append(
            f"- `GET /v1/wallet`, SQLite, 256 conn ≥ 0.5× bare Hummingbird `/health` 256 conn and p99 ≤ 25 ms: "
            f"{r:.2f}×, p99 {w['p99']:.2f} ms → {verdict(r >= 0.5 and w['p99'] <= 25)}")
    else:
        targets.append("- `GET /v1/wallet`, SQLite, 256 conn vs `/health`: not measured in this run")
    p = values.get(("postgres", "action", 64))
    if p and pgbench_prepared[1]:
        r = p["rps"] / pgbench_prepared[1]
        rs = p["rps"] / pgbench_simple[1] if pgbench_simple[1] else None
        simple = f" ({rs:.2f}× `-M simple`)" if rs is not None else ""
        targets.append(
            f"- `POST /v1/actions/{{name}}`, PostgreSQL, 64 conn ≥ 0.35× pgbench (`-M prepared`) and p99 ≤ 50 ms: "
            f"{r:.2f}×{simple}, p99 {p['p99']:.2f} ms → {verdict(r >= 0.35 and p['p99'] <= 50)}")
    else:
        targets.append("- `POST /v1/actions/{name}`, PostgreSQL, 64 conn vs pgbench: not measured in this run")
    for conns in (64, 256):
        s = values.get(("sqlite", "action", conns))
        q = values.get(("postgres", "action", conns))
        if s and q:
            targets.append(
                f"- `POST /v1/actions/{{name}}`, SQLite ≥ PostgreSQL, {conns} conn: {s['rps']:.0f} vs {q['rps']:.0f} req/s "
                f"→ {verdict(s['rps'] >= q['rps'])}")
        else:
            targets.append(f"- `POST /v1/actions/{{name}}`, SQLite ≥ PostgreSQL, {conns} conn: not measured in this run")

    # ------------------------------------------------------------ books
    books_out = []
    for run, store, data in books_lines:
        books_out.append(
            f"| {run} | {STORE_NAMES.get(store, store)} | {data['users']} | {data['negative']} | {data['held']} | "
            f"{data['debited']} | {data['actions_2xx']} | {data['actions_other']} | {data['wrk_posts']} | "
            f"{'ok' if data['ok'] else '**MISMATCH**'} |")

    out = []
    out.append(f"# Tally HTTP benchmark on {meta['host']} ({meta['date']})")
    out.append("")
    out.append(f"- machine: {meta['machine']}")
    out.append(f"- Tally {meta['commit']}, `swift build -c release`, `tally serve --backlog {meta['backlog']}`; "
               f"load generator, server and database share the cores (wrk -t{meta['wrk_threads']})")
    out.append(f"- {meta['duration']} s per case after {meta['warmup']} s warm-up; {meta['users']} users, "
               f"a random user per request; {len(runs)} run(s) per case, median shown")
    if meta.get("load"):
        out.append(f"- cores busy with other work just before each part (2 s sample): {meta['load']}")
    if meta.get("pg"):
        out.append(f"- Tally on PostgreSQL: {meta['pg']}")
    out.append("- Tally on SQLite: embedded store in a fresh `--data-dir` on "
               f"{meta.get('sqlite_fs') or '?'}")
    out.append("")
    if args.ceilings_reused:
        out.append("## Ceilings (reused from an earlier run: not the same machine state)")
    else:
        out.append("## Ceilings (same run, before Tally)")
    out.append("")
    if ceilings_text:
        body = ceilings_text.strip().splitlines()
        if body and body[0].startswith("## "):
            out.append(f"_{body[0][3:].strip()}_")
            body = body[1:]
        out.extend(body)
    else:
        out.append("_not measured in this run (CEILINGS=0): the ratios against them are n/a_")
    out.append("")
    out.append("## Tally")
    out.append("")
    out.append("| case | req/s | p50 ms | p99 ms | errors | ratio |")
    out.append("|---|---:|---:|---:|---:|---|")
    out.extend(table)
    if len(runs) > 1:
        out.append("")
        out.append("req/s of each run (the table shows the median; errors are summed over runs):")
        out.append("")
        out.append("| case | " + " | ".join(f"run {r}" for r in runs) + " |")
        out.append("|---|" + "---:|" * len(runs))
        for store, kind, conns in order + PURCHASE_CASES:
            a = values.get((store, kind, conns))
            if a:
                out.append(f"| {KIND_NAMES[kind]}, {STORE_NAMES[store]}, {conns} conn | "
                           + " | ".join(f"{a['runs'][r]:.0f}" if r in a["runs"] else "–" for r in runs) + " |")
    if args.baseline_rows:
        out.append("")
        out.extend(baseline_comparison(rows, read_rows(args.baseline_rows), args.baseline_name, order + PURCHASE_CASES))
    sync = sync_bench.sync_section(values, sync_lines)
    if sync:
        out.append("")
        out.extend(sync)
    purchases = purchase_bench.purchases_section(values, args.verify, args.purchase_rate, os.cpu_count() or 1)
    if purchases:
        out.append("")
        out.extend(purchases)
    out.append("")
    out.append("## Targets")
    out.append("")
    out.extend(targets)
    if books_out:
        out.append("")
        out.append("## Books")
        out.append("")
        out.append("After each store's run, every wallet read back through `GET /admin/v1/users/{id}`; tokens debited must "
                   "equal the successful `POST /v1/actions` replies the server counted (`/metrics`), smoke test and "
                   "warm-ups included. wrk's count of POST replies (measured + warm-up) is informational: requests "
                   "in flight when wrk stops are not in it.")
        out.append("")
        out.append("| run | store | users | negative wallets | held | tokens debited | action 2xx | action non-2xx | wrk POST replies | books |")
        out.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
        out.extend(books_out)
        bought = [(run, store, data) for run, store, data in books_lines if "purchases" in data]
        if bought:
            out.append("")
            out.append("Purchases: every user's ledger read whole and their purchases listed (`/admin/v1/users/{id}/entries`, "
                       "`/purchases`): each listed purchase is a transaction signed for that user, credited by exactly one "
                       "`purchase` entry of 100 tokens, and the ledger sums to the balance (tokens debited above count the "
                       "purchases in). Credited transactions must lie between those answered 2xx (replay set + new ones "
                       "wrk counted, less one a thread) and those handed out.")
            out.append("")
            out.append("| run | store | purchases credited | at least | at most | problems | purchase POST 2xx | non-2xx | purchases |")
            out.append("|---:|---|---:|---:|---:|---:|---:|---:|---|")
            for run, store, data in bought:
                examples = "; ".join(data["purchase_examples"])
                out.append(f"| {run} | {STORE_NAMES.get(store, store)} | {data['purchases']} | {data['purchase_min']} | "
                           f"{data['purchase_max']} | {data['purchase_problems']}{' (' + examples + ')' if examples else ''} | "
                           f"{data['purchases_2xx']} | {data['purchases_other']} | "
                           f"{'ok' if data['purchases_ok'] else '**MISMATCH**'} |")
    print("\n".join(out))


def baseline_comparison(rows, baseline_rows, name, order):
    """The build against the BASELINE binary measured in the same run: medians and their ratio per case."""
    def medians(items):
        cases = {}
        for r in items:
            cases.setdefault((r["store"], r["kind"], r["conns"]), []).append(r)
        return {k: (median([r["rps"] for r in v]), median([r["p99"] for r in v]), len(v)) for k, v in cases.items()}
    now, before = medians(rows), medians(baseline_rows)
    out = [f"## This build against the baseline (`{os.path.basename(name) or name}`), same run",
           "",
           "Each store's cases ran on both binaries one after the other, alternating which went first; medians over runs.",
           "",
           "| case | baseline req/s | build req/s | build / baseline | baseline p99 ms | build p99 ms |",
           "|---|---:|---:|---:|---:|---:|"]
    for key in order:
        if key in now and key in before:
            (rps, p99, n), (brps, bp99, _) = now[key], before[key]
            store, kind, conns = key
            out.append(f"| {KIND_NAMES[kind]}, {STORE_NAMES[store]}, {conns} conn | {brps:.0f} | {rps:.0f} | "
                       f"{rps / brps:.2f}× | {bp99:.2f} | {p99:.2f} |")
    return out


# ---------------------------------------------------------------- main

def main():
    global ARGS
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("seed")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--admin-port", type=int, required=True)
    s.add_argument("--admin-key", required=True)
    s.add_argument("--users", type=int, required=True)
    s.add_argument("--grant", type=int, required=True)
    s.add_argument("--tokens", required=True)
    s.add_argument("--ids", required=True)
    s.add_argument("--workers", type=int, default=8)
    b = sub.add_parser("books")
    b.add_argument("--port", type=int, required=True)
    b.add_argument("--admin-port", type=int, required=True)
    b.add_argument("--admin-key", required=True)
    b.add_argument("--ids", required=True)
    b.add_argument("--grant", type=int, required=True)
    b.add_argument("--signup-grant", type=int, default=0)
    b.add_argument("--wrk-posts", type=int, default=0)
    b.add_argument("--purchases", default="")
    b.add_argument("--purchase-min", type=int, default=0)
    b.add_argument("--purchase-max", type=int, default=0)
    b.add_argument("--workers", type=int, default=8)
    d = sub.add_parser("redeem")
    d.add_argument("--port", type=int, required=True)
    d.add_argument("--purchases", required=True)
    d.add_argument("--count", type=int, required=True)
    d.add_argument("--workers", type=int, default=8)
    d.set_defaults(admin_port=0)  # parallel() opens no admin connection it does not use
    r = sub.add_parser("report")
    r.add_argument("--meta", required=True)
    r.add_argument("--rows", required=True)
    r.add_argument("--books", required=True)
    r.add_argument("--sync", default="")
    r.add_argument("--ceilings", default="")
    r.add_argument("--ceilings-reused", action="store_true")
    r.add_argument("--baseline-rows", default="")
    r.add_argument("--baseline-name", default="")
    r.add_argument("--verify", default="")
    r.add_argument("--purchase-rate", default="0")
    ARGS = parser.parse_args()
    {"seed": seed, "books": books, "redeem": redeem, "report": report}[ARGS.command](ARGS)


ARGS = None
if __name__ == "__main__":
    main()
