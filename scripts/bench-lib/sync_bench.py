#!/usr/bin/env python3
"""The synced-collections part of scripts/bench (standard library only).

  seed-docs  give every benchmark user PER_USER documents of a range-keyed collection (one push each)
  pull       give one new user DOCS documents, then time restoring them all with GET /v1/sync/pull (no cursor,
             pages of 1,000, every page parsed) REPEAT times; prints one JSON line
  and, for tally_bench.py's report, sync_section(): the table of the range query, push, pull and event rows.
"""
import argparse
import http.client
import json
import secrets
import statistics
import sys
import threading
import time


def request(conn, method, path, token, body=None):
    headers = {"Authorization": "Bearer " + token}
    data = None
    if body is not None:
        data = json.dumps(body, separators=(",", ":")).encode()
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    resp = conn.getresponse()
    return resp.status, resp.read()


def push(conn, token, collection, docs):
    """Pushes `docs` ((id, data) pairs) in batches of 100 as a fresh client; fails unless every one applied."""
    client = "bench-seed-" + secrets.token_hex(12)
    for start in range(0, len(docs), 100):
        mutations = [{"id": start + i + 1, "op": "put", "collection": collection, "docId": doc_id, "data": data}
                     for i, (doc_id, data) in enumerate(docs[start:start + 100])]
        status, text = request(conn, "POST", "/v1/sync/push", token, {"clientId": client, "mutations": mutations})
        if status != 200:
            raise RuntimeError(f"POST /v1/sync/push answered {status}: {text[:300]!r}")
        results = json.loads(text)["results"]
        bad = [r for r in results if r["status"] != "applied"]
        if bad:
            raise RuntimeError(f"POST /v1/sync/push did not apply {len(bad)} mutations, e.g. {bad[0]}")


def seed_docs(args):
    with open(args.tokens) as handle:
        tokens = [line.strip() for line in handle if line.strip()]
    lock = threading.Lock()
    state = {"next": 0, "error": None}
    started = time.monotonic()

    def loop():
        conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=60)
        while True:
            with lock:
                if state["error"] is not None or state["next"] >= len(tokens):
                    return
                index = state["next"]
                state["next"] += 1
            try:
                docs = [(f"seed-{i}", {args.range_key: f"2026-11-{1 + i % 30:02d}", "done": i % 3 == 0, "habit": f"h{i % 4}"})
                        for i in range(args.per_user)]
                push(conn, tokens[index], args.collection, docs)
            except BaseException as error:  # noqa: BLE001 - reported below
                with lock:
                    state["error"] = state["error"] or error
                return

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if state["error"] is not None:
        raise state["error"]
    print(f"seeded {args.per_user} documents for each of {len(tokens)} users in {time.monotonic() - started:.1f} s",
          file=sys.stderr)


def pull(args):
    conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=60)
    conn.request("POST", "/v1/auth/guest", body=json.dumps({"deviceId": "bench-pull-" + secrets.token_hex(16)}),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    reply = json.loads(resp.read())
    if resp.status not in (200, 201):
        raise RuntimeError(f"POST /v1/auth/guest answered {resp.status}: {reply}")
    token = reply["accessToken"]
    text = "Your chart says today favours patience; an old question finds its answer. " * 3
    docs = [(f"m{i:05d}", {args.range_key: f"2026-{1 + i // 900 % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:00:00Z",
                           "role": "assistant" if i % 2 else "user", "text": text}) for i in range(args.docs)]
    push(conn, token, args.collection, docs)
    timings = []
    pages = 0
    for _ in range(args.repeat):
        fresh = http.client.HTTPConnection("127.0.0.1", args.port, timeout=60)  # a new device: a new connection
        started = time.perf_counter()
        restored = {}
        cursor = None
        pages = 0
        while True:
            path = "/v1/sync/pull?limit=1000" + (f"&cursor={cursor}" if cursor else "")
            status, body = request(fresh, "GET", path, token)
            if status != 200:
                raise RuntimeError(f"GET /v1/sync/pull answered {status}: {body[:300]!r}")
            page = json.loads(body)
            pages += 1
            for doc in page["changes"]:
                restored[(doc["collection"], doc["id"])] = doc
            cursor = page["cursor"]
            if not page["hasMore"]:
                break
        timings.append(time.perf_counter() - started)
        fresh.close()
        if len(restored) != args.docs:
            raise RuntimeError(f"the pull restored {len(restored)} documents, not {args.docs}")
    print(json.dumps({"docs": args.docs, "pages": pages, "median_s": statistics.median(timings),
                      "runs_s": [round(t, 4) for t in timings]}))


# ---------------------------------------------------------------- report

STORE_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}


def sync_section(values, sync_lines):
    """Markdown lines for the synced-collections rows. `values` maps (store, kind, conns) to wrk medians
    (kinds wallet, range, push); `sync_lines` are (run, store, kind, data) of the pull and event runs."""
    def verdict(ok):
        return "**met**" if ok else "**NOT met**"

    def med(items, key):
        return statistics.median([i[key] for i in items]) if items else None

    rows, targets = [], []
    for store in ("sqlite", "postgres"):
        name = STORE_NAMES[store]
        rng, wallet = values.get((store, "range", 64)), values.get((store, "wallet", 64))
        if rng:
            ratio = rng["rps"] / wallet["rps"] if wallet else None
            rows.append(f"| `GET /v1/collections/bench.logs/docs` (20 of a month), {name}, 64 conn | {rng['rps']:.0f} req/s | "
                        f"{rng['p50']:.2f} | {rng['p99']:.2f} | {rng['errors']} | "
                        + (f"{ratio:.2f}× `GET /v1/wallet` 64 conn" if ratio else "n/a") + " |")
            if ratio is not None:
                targets.append(f"- range query (20 items), {name}, 64 conn ≥ 0.5× `GET /v1/wallet` 64 conn: "
                               f"{ratio:.2f}× → {verdict(ratio >= 0.5)}")
        pushed = values.get((store, "push", 16))
        if pushed:
            rate = pushed["rps"] * 100
            rows.append(f"| `POST /v1/sync/push` (100 new documents each), {name}, 16 conn | {rate:.0f} mutations/s "
                        f"({pushed['rps']:.0f} req/s) | {pushed['p50']:.2f} | {pushed['p99']:.2f} | {pushed['errors']} | "
                        + f"{rate / 20000:.2f}× the 20,000 mutations/s target (SQLite's)" + " |")
            if store == "sqlite":
                targets.append(f"- push, SQLite, 100-mutation batches ≥ 20,000 mutations/s: {rate:.0f} → "
                               f"{verdict(rate >= 20000)}")
        pulls = [d for _, s, k, d in sync_lines if s == store and k == "pull"]
        if pulls:
            seconds = med(pulls, "median_s")
            rows.append(f"| restore 10,000 documents with `GET /v1/sync/pull` (pages of 1,000, parsed), {name} | "
                        f"{seconds * 1000:.0f} ms | | | 0 | {seconds / 0.5:.2f}× the 0.5 s target |")
            targets.append(f"- pull restoring 10,000 documents ≤ 0.5 s, {name}: {seconds * 1000:.0f} ms → "
                           f"{verdict(seconds <= 0.5)}")
        events = [d for _, s, k, d in sync_lines if s == store and k == "events"]
        if events:
            p50, p99 = med(events, "deliveryP50"), med(events, "deliveryP99")
            missed = sum(e["missed"] + e["writeErrors"] for e in events)
            streams = min(e["streams"] for e in events)
            rate = med(events, "writesPerSecond")
            rows.append(f"| `changed` event after a write by the user's other connection, {streams:,} open streams, "
                        f"{rate:.0f} writes/s, {name} | write sent → event | {p50:.2f} | {p99:.2f} | {missed} missed | "
                        f"{p99 / 50:.2f}× the 50 ms target |")
            targets.append(f"- {streams:,} streams, {rate:.0f} writes/s, p99 write → event ≤ 50 ms, {name}: {p99:.1f} ms, "
                           f"{missed} missed → {verdict(p99 <= 50 and missed == 0 and streams >= 5000 and rate >= 475)}")
    if not rows:
        return []
    out = ["## Synced collections", "",
           "| case | rate | p50 ms | p99 ms | errors | ratio |", "|---|---:|---:|---:|---:|---|"]
    out.extend(rows)
    out.append("")
    out.extend(targets)
    return out


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("seed-docs")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--tokens", required=True)
    s.add_argument("--collection", required=True)
    s.add_argument("--range-key", required=True)
    s.add_argument("--per-user", type=int, default=40)
    p = sub.add_parser("pull")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--collection", required=True)
    p.add_argument("--range-key", required=True)
    p.add_argument("--docs", type=int, default=10000)
    p.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    {"seed-docs": seed_docs, "pull": pull}[args.command](args)


if __name__ == "__main__":
    main()
