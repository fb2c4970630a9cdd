#!/usr/bin/env python3
"""The App Store purchases part of scripts/bench (standard library only), used by tally_bench.py:

  read_signed()       the transactions `tally-dev bench-purchases sign` wrote (userId, transactionId, token, JWS a line)
  check_user()        one user's purchases against their ledger: each credited once, to its own user, 100 tokens
  purchase_books()    the totals and verdict of those checks for the books
  purchases_section() the report's table of the purchase rows and the one-core verification figure
"""
import json
import os

TOKENS_PER_PURCHASE = 100  # scripts/bench's product bench.tokens100
STORE_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}


def read_signed(path, limit=None):
    """[(userId, transactionId, accessToken, jws)] of the first `limit` lines (all when None)."""
    rows = []
    with open(path) as handle:
        for line in handle:
            if limit is not None and len(rows) >= limit:
                break
            user_id, transaction_id, token, jws = line.rstrip("\n").split("\t")
            rows.append((user_id, transaction_id, token, jws))
    return rows


def check_user(user_id, wallet, entries, purchases, owner_of):
    """Problems (strings) in one user's books, and the tokens their purchases credited.

    `entries` is the user's whole ledger (newest first), `purchases` what GET /admin/v1/users/{id}/purchases lists,
    `owner_of` maps each signed transaction id to the user it was signed for. Each listed purchase must be one signed
    for this user, credited, of 100 tokens, listed once and credited by exactly one `purchase` ledger entry (the entry's
    reason starts with the transaction id); no purchase entry without a listed purchase; the ledger sums to the balance."""
    problems = []
    listed = {}
    for purchase in purchases:
        tid = purchase["transactionId"]
        if tid in listed:
            problems.append(f"{tid} listed twice")
        listed[tid] = purchase
        if owner_of.get(tid) != user_id:
            problems.append(f"{tid} is not a transaction signed for this user")
        if purchase.get("status") != "credited" or purchase.get("tokens") != TOKENS_PER_PURCHASE:
            problems.append(f"{tid} is {purchase.get('status')} with {purchase.get('tokens')} tokens")
    credited = {}
    for entry in entries:
        if entry["kind"] != "purchase":
            continue
        tid = (entry.get("reason") or "").split(" ")[0]
        credited[tid] = credited.get(tid, 0) + 1
        if entry["amount"] != TOKENS_PER_PURCHASE:
            problems.append(f"{tid} credited {entry['amount']} tokens")
    for tid, times in credited.items():
        if times != 1:
            problems.append(f"{tid} credited {times} times")
        if tid not in listed:
            problems.append(f"{tid} credited but not listed")
    for tid in listed:
        if tid not in credited:
            problems.append(f"{tid} listed but never credited")
    total = sum(entry["amount"] for entry in entries)
    if total != wallet["balance"] or (entries and entries[0]["balanceAfter"] != wallet["balance"]):
        problems.append(f"the ledger sums to {total}, the wallet shows {wallet['balance']}")
    return problems, TOKENS_PER_PURCHASE * len(listed)


def purchase_books(results, minimum, maximum):
    """Totals of check_user's results [(problems, purchased tokens, listed)] against the bounds wrk's replies give:
    at least the transactions answered 2xx, at most those handed out, are credited."""
    listed = sum(count for _, _, count in results)
    problems = [p for found, _, _ in results for p in found]
    return {
        "purchases": listed, "purchase_min": minimum, "purchase_max": maximum,
        "purchase_problems": len(problems), "purchase_examples": problems[:3],
        "purchases_ok": not problems and minimum <= listed <= maximum,
    }


def purchases_section(values, verify_path, purchase_rate, cores):
    """Markdown lines: the purchase rows (req/s, p50, p99, errors, against the same run's GET /v1/wallet at 64
    connections) and the one-core verification figure. `values` maps (store, kind, conns) to wrk medians."""
    def verdict(ok):
        return "**met**" if ok else "**NOT met**"

    verify = None
    if verify_path and os.path.exists(verify_path) and os.path.getsize(verify_path) > 0:
        verify = json.load(open(verify_path))
    rows, targets = [], []
    ceiling = verify["verificationsPerSecond"] * cores if verify else None
    for store in ("sqlite", "postgres"):
        name = STORE_NAMES[store]
        wallet = values.get((store, "wallet", 64))
        new, replay = values.get((store, "purchase-new", 64)), values.get((store, "purchase-replay", 64))
        for kind, item in (("new transactions", new), ("replays", replay)):
            if not item:
                continue
            ratios = []
            if wallet:
                ratios.append(f"{item['rps'] / wallet['rps']:.2f}× `GET /v1/wallet` 64 conn ({wallet['rps']:.0f})")
            if kind == "new transactions" and ceiling:
                ratios.append(f"{item['rps'] / ceiling:.2f}× {cores} cores × one-core verifications")
            short = " (**ran out of transactions**: a lower bound)" if item.get("ran_out") else ""
            rows.append(f"| `POST /v1/purchases/apple`, {kind}, {name}, 64 conn | {item['rps']:.0f}{short} | "
                        f"{item['p50']:.2f} | {item['p99']:.2f} | {item['errors']} | {'; '.join(ratios) or 'n/a'} |")
        if replay and wallet:
            ratio = replay["rps"] / wallet["rps"]
            targets.append(f"- purchase replays, {name}, 64 conn ≥ 0.5× `GET /v1/wallet` 64 conn: {ratio:.2f}× → "
                           f"{verdict(ratio >= 0.5)}")
        if new:
            targets.append(f"- new purchases, {name}, 64 conn: {new['rps']:.0f} req/s, p99 {new['p99']:.1f} ms (no target; "
                           "each is a signature check and a credit)")
    if not rows and not verify:
        return []
    out = ["## App Store purchases", ""]
    if verify:
        runs = ", ".join(f"{r:.0f}" for r in verify["runs"])
        out.append(f"`AppStoreVerifier.verifyTransaction`, one at a time (`tally-dev bench-purchases verify`): "
                   f"**{verify['verificationsPerSecond']:.0f} verifications/s on one core** (median of "
                   f"{len(verify['runs'])} runs of {verify['count']}: {runs}); one verification p50 "
                   f"{verify['p50Micros']:.0f} µs, p99 {verify['p99Micros']:.0f} µs; "
                   + (f"the same bytes again (a replay, from the verifier's cache) {verify['replayVerificationsPerSecond']:.0f}/s; "
                      if "replayVerificationsPerSecond" in verify else "")
                   + f"{verify['cpuPerWallSecond']:.2f} CPU s per s; a JWS of {verify['jwsBytes']} bytes. New transactions "
                   f"were signed for {purchase_rate}/s over warm-up and measurement.")
        out.append("")
    if rows:
        out.append("| case | req/s | p50 ms | p99 ms | errors | ratio |")
        out.append("|---|---:|---:|---:|---:|---|")
        out.extend(rows)
        out.append("")
        out.extend(targets)
    return out
