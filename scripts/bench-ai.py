#!/usr/bin/env python3
"""The image and peer sections of scripts/bench-ai (standard library only; each prints one JSON line).

  png        write a real PNG of random pixels of about --bytes bytes (it decodes; noise does not compress)
  images     --concurrency questions at once, each with that image, in bursts alternating straight to dev-llm and
             through Tally (the same bytes, so the upload's time is in both paths and cancels in the difference);
             the server's RSS every 100 ms; a bystander process doing GET /v1/wallet at --bystander-rate a second;
             every answer must be 200 or 503 `busy`
  peers      text and image questions at each --concurrency, every worker cycling dev-llm directly, Tally and
             LiteLLM's proxy (so all three see the same load): time to first byte and total, p50/p99, per path
  ab         two builds of Tally on one dev-llm, every worker cycling dev-llm directly, A and B, short streams (one
             token: thousands of calls a round): each round's first-byte p50 of the three and B - A, so that a change
             worth a tenth of a millisecond shows (scripts/bench-lib/gateway-ab)
  books      every listed user's ledger entries sum to its balance and held, nothing held, the gateway's captures
  bystander  (used by images) GET /v1/wallet at --rate a second until its standard input closes
  render-images, render-peers
             the Markdown of a result with its books; exit 1 when a check fails (statuses, books, the RSS bound,
             the added p99 beyond the relay, the bystander's p99, Tally's added p50 not 10x below LiteLLM's)
"""
import argparse
import base64
import http.client
import json
import math
import os
import statistics
import struct
import subprocess
import sys
import threading
import time
import zlib

TIMEOUT = 60  # seconds for any one request: a phase cannot hang


def percentile(values, q):
    """The q-th percentile (nearest rank) of values, or None."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered), max(1, math.ceil(q / 100 * len(ordered)))) - 1]


def median(values):
    """The median of values (the mean of the middle two for an even count), or None."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return None if not ordered else ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def stats(values):
    return {"n": len(values), "p50": percentile(values, 50), "p99": percentile(values, 99)}


def lines(path):
    with open(path) as handle:
        return [line.strip() for line in handle if line.strip()]


# ---------------------------------------------------------------- png

def png_bytes(side):
    """A side × side RGB PNG of random pixels: every filter byte 0, the IDAT deflated at level 1."""
    raw = b"".join(b"\x00" + os.urandom(side * 3) for _ in range(side))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 1)) + chunk(b"IEND", b""))


def png(args):
    side = args.side or int((args.bytes / 3) ** 0.5)
    data = png_bytes(side)
    with open(args.out, "wb") as out:
        out.write(data)
    print(json.dumps({"side": side, "bytes": len(data)}))


def question(model, image_path, max_tokens, stream, detail="high"):
    """A chat body: one user message with a text part and, when image_path is given, that image as a data URL."""
    parts = [{"type": "text", "text": "What is in this picture?" if image_path else "Tell me a fortune."}]
    if image_path:
        mime = {"jpg": "jpeg", "jpeg": "jpeg", "png": "png", "webp": "webp", "gif": "gif"}[image_path.rsplit(".", 1)[-1].lower()]
        with open(image_path, "rb") as handle:
            url = f"data:image/{mime};base64," + base64.b64encode(handle.read()).decode()
        parts.append({"type": "image_url", "image_url": {"url": url, "detail": detail}})
    body = {"model": model, "messages": [{"role": "user", "content": parts}], "max_tokens": max_tokens, "stream": stream}
    return json.dumps(body).encode()


# ---------------------------------------------------------------- one call

def call(port, body, key, stream, connections=None):
    """POSTs body to /v1/chat/completions (/v1/ai/chat/completions when key is a Tally user's); returns (status,
    first_byte_ms, total_ms, reply bytes, headers). A stream's "first byte" is its first data line's: Tally opens every
    stream with a 2 KiB comment (for URLSession's content sniffing), sent before the model's first token, which would
    otherwise time the head. On a fresh connection, or, given connections (a dict by port, one worker's), on the one
    kept there, as an app's HTTP client does; a kept connection the server closed meanwhile is replaced once, untimed.
    A connection error raises."""
    path = "/v1/ai/chat/completions" if key.startswith("tally:") else "/v1/chat/completions"
    token = key.removeprefix("tally:")
    kept = connections.pop(port, None) if connections is not None else None
    conn = kept or http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    reusable = False
    try:
        started = time.monotonic()
        try:
            conn.request("POST", path, body=body, headers={
                "Authorization": "Bearer " + token, "Content-Type": "application/json"})
            resp = conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            if kept is None:
                raise
            conn.close()
            return call(port, body, key, stream, connections)
        first = b""
        while stream and resp.status == 200 and b"data:" not in first:
            piece = resp.read1(65536)
            if not piece:
                break
            first += piece
        first_byte = time.monotonic()
        rest = resp.read()
        ended = time.monotonic()
        reusable = connections is not None and not resp.will_close
        return resp.status, (first_byte - started) * 1000, (ended - started) * 1000, first + rest, dict(resp.getheaders())
    finally:
        if reusable:
            connections[port] = conn
        else:
            conn.close()


def run_workers(worker, count, seconds):
    """Runs worker(0) … worker(count - 1) on threads of their own, each to its deadline `seconds` from now; returns
    when all are done (or a call's timeout past it)."""
    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + TIMEOUT * 2)


def streamed(port, body, key, label, failures, connections=None):
    """call() of a stream that must answer 200 with events: (first_byte_ms, total_ms, headers), or None with the
    failure noted in failures under label."""
    try:
        status, first, total, text, headers = call(port, body, key, True, connections)
    except (OSError, http.client.HTTPException) as error:
        failures.append(f"{label}: {type(error).__name__}: {error}")
        return None
    if status != 200 or b"data:" not in text:
        failures.append(f"{label}: {status} {text[:200]!r}")
        return None
    return first, total, headers


def timing(headers, name):
    """The `dur` (ms) of metric `name` in a Server-Timing header, or None."""
    for metric in headers.get("Server-Timing", "").split(","):
        fields = [field.strip() for field in metric.split(";")]
        if fields[0] == name:
            for field in fields[1:]:
                if field.startswith("dur="):
                    return float(field[4:])
    return None


def busy(status, text, headers):
    """A 503 `busy` with Retry-After, as the body budget answers."""
    try:
        code = json.loads(text)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return False
    return status == 503 and code == "busy" and "Retry-After" in headers


# ---------------------------------------------------------------- images

def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def cpu_seconds(pid):
    """The user + system CPU time of process pid so far."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def images(args):
    tokens = lines(args.tokens)[:args.concurrency]
    if len(tokens) < args.concurrency:
        raise SystemExit(f"need {args.concurrency} users, have {len(tokens)}")
    direct = question(args.upstream_model, args.image, args.max_tokens, False)
    bodies = {"direct": direct, "relay": direct, "gateway": question(args.model, args.image, args.max_tokens, False)}
    targets = {"direct": (args.upstream_port, lambda i: args.upstream_key),
               "relay": (args.relay_port, lambda i: args.upstream_key),
               "gateway": (args.port, lambda i: "tally:" + tokens[i])}

    samples = []  # (monotonic, rss)
    sampling = threading.Event()

    def sample():
        while not sampling.is_set():
            samples.append((time.monotonic(), rss_bytes(args.server_pid)))
            sampling.wait(0.1)

    bystander = subprocess.Popen(
        [sys.executable, __file__, "bystander", "--port", str(args.port), "--token", lines(args.tokens)[-1],
         "--rate", str(args.bystander_rate), "--out", args.bystander_out], stdin=subprocess.PIPE)
    rss_before = rss_bytes(args.server_pid)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    time.sleep(1)  # the bystander's first calls, before any burst

    results = {"direct": [], "relay": [], "gateway": []}
    own = []  # each answered gateway call's own time (its Server-Timing `gateway`), ms
    processes = {"tally": args.server_pid, "dev-llm": args.upstream_pid, "relay": args.relay_pid}
    cpu = {(path, who): 0.0 for path in results for who in processes}  # CPU seconds during each path's bursts
    windows = []  # (start, end) of each gateway burst
    failures = []
    orders = (("direct", "relay", "gateway"), ("gateway", "direct", "relay"), ("relay", "gateway", "direct"))
    for round_ in range(args.rounds):
        for path in orders[round_ % 3]:
            port, key = targets[path]
            barrier = threading.Barrier(args.concurrency)

            def one(i, path=path, port=port, key=key, barrier=barrier):
                barrier.wait()
                try:
                    status, _, total, text, headers = call(port, bodies[path], key(i), False)
                except (OSError, http.client.HTTPException) as error:
                    failures.append(f"{path}: {type(error).__name__}: {error}")
                    return
                if status == 200 and json.loads(text).get("choices"):
                    results[path].append(("ok", total, round_))
                    if path == "gateway":
                        own.append(timing(headers, "gateway"))
                elif path != "direct" and busy(status, text, headers):
                    results[path].append(("busy", total, round_))
                else:
                    failures.append(f"{path}: {status} {text[:200]!r}")

            threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(args.concurrency)]
            started = time.monotonic()
            cpu_before = {who: cpu_seconds(pid) for who, pid in processes.items()}
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(TIMEOUT * 2)
            for who, pid in processes.items():
                cpu[path, who] += cpu_seconds(pid) - cpu_before[who]
            if any(thread.is_alive() for thread in threads):
                failures.append(f"{path}: a burst did not end within {TIMEOUT * 2} s")
            if path == "gateway":
                windows.append((started, time.monotonic()))
            time.sleep(args.pause)
    time.sleep(args.settle)
    sampling.set()
    sampler.join()
    rss_after = rss_bytes(args.server_pid)
    bystander.stdin.close()
    bystander.wait(30)

    wallet = []  # (monotonic, ms, status)
    with open(args.bystander_out) as handle:
        for line in handle:
            at, ms, status = line.split()
            wallet.append((float(at), float(ms), int(status)))
    during = [ms for at, ms, _ in wallet if any(start <= at <= end for start, end in windows)]
    ok = {path: [ms for kind, ms, _ in rows if kind == "ok"] for path, rows in results.items()}

    def paired(path, base="direct"):
        """Each round's p99 through `path` minus its p99 through `base` (the bursts of a round run back to back,
        so the machine's drift between rounds cancels), in round order."""
        burst = lambda p, r: [ms for kind, ms, round_ in results[p] if kind == "ok" and round_ == r]
        return [round(percentile(burst(path, r), 99) - percentile(burst(base, r), 99), 1)
                for r in range(args.rounds) if burst(path, r) and burst(base, r)]
    result = {
        "rounds": args.rounds, "concurrency": args.concurrency,
        "image_bytes": os.path.getsize(args.image), "body_bytes": len(bodies["gateway"]),
        "direct": stats(ok["direct"]), "relay": stats(ok["relay"]), "gateway": stats(ok["gateway"]),
        "gateway_own": stats([ms for ms in own if ms is not None]), "gateway_own_missing": own.count(None),
        "gateway_rounds": paired("gateway"), "relay_rounds": paired("relay"),
        "beyond_rounds": paired("gateway", "relay"),
        "gateway_busy": sum(1 for kind, _, _ in results["gateway"] if kind == "busy"),
        "relay_busy": sum(1 for kind, _, _ in results["relay"] if kind == "busy"),
        "gateway_busy_ms": stats([ms for kind, ms, _ in results["gateway"] if kind == "busy"]),
        "rss_before": rss_before, "rss_peak": max(rss for _, rss in samples), "rss_after": rss_after,
        "rss_samples": len(samples), "burst_seconds": sum(end - start for start, end in windows),
        "cpu": {f"{path} {who}": round(seconds, 2) for (path, who), seconds in cpu.items()},
        "wallet_during": stats(during), "wallet_all": stats([ms for _, ms, _ in wallet]),
        "wallet_errors": sum(1 for _, _, status in wallet if status != 200),
        "failures": failures[:10], "failure_count": len(failures),
    }
    print(json.dumps(result))


def bystander(args):
    """GET /v1/wallet at args.rate a second on one keep-alive connection until stdin closes; writes
    `monotonic ms status` lines to args.out."""
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    conn = None
    rows = []
    interval = 1 / args.rate
    next_at = time.monotonic()
    deadline = next_at + args.limit
    while not stop.is_set() and time.monotonic() < deadline:
        started = time.monotonic()
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=TIMEOUT)
            conn.request("GET", "/v1/wallet", headers={"Authorization": "Bearer " + args.token})
            resp = conn.getresponse()
            resp.read()
            status = resp.status
        except (OSError, http.client.HTTPException):
            status = 0
            conn = None
        rows.append(f"{started} {(time.monotonic() - started) * 1000:.3f} {status}\n")
        next_at += interval
        stop.wait(max(0, next_at - time.monotonic()))
    with open(args.out, "w") as out:
        out.writelines(rows)


# ---------------------------------------------------------------- peers

# The peers section's paths, in each worker's cycle; the first is the baseline the others' added time is taken from.
PEER_PATHS = ("direct", "relay", "stack", "tally", "litellm")
# The paths that speak to dev-llm's own API (its model name, its key): directly or through a relay with no model map.
UPSTREAM_PATHS = {"direct", "relay", "stack"}


def peers(args):
    tokens = lines(args.tokens)
    paths = list(PEER_PATHS)
    report = {}
    failures = []
    for concurrency in args.concurrency:
        for kind in ["text"] + args.image.split(","):
            image = None if kind == "text" else kind
            bodies = {path: question(args.upstream_model if path in UPSTREAM_PATHS else args.model, image, args.max_tokens, True)
                      for path in paths}
            ports = {"direct": args.upstream_port, "relay": args.relay_port, "stack": args.stack_port, "tally": args.port,
                     "litellm": args.litellm_port}
            rows = {path: [] for path in paths}
            own = []  # Tally's Server-Timing gateway (ms) a call
            deadline = time.monotonic() + args.seconds

            def worker(i):
                turn = i % len(paths)
                connections = {} if args.connections == "reused" else None
                keys = {path: args.upstream_key for path in UPSTREAM_PATHS} | {"tally": "tally:" + tokens[i], "litellm": args.litellm_key}
                while time.monotonic() < deadline:
                    path = paths[turn % len(paths)]
                    turn += 1
                    answer = streamed(ports[path], bodies[path], keys[path], f"{path} {kind} x{concurrency}", failures, connections)
                    if answer is None:
                        continue
                    first, total, headers = answer
                    rows[path].append((first, total))
                    gateway = timing(headers, "gateway") if path == "tally" else None
                    if gateway is not None:
                        own.append(gateway)

            run_workers(worker, concurrency, args.seconds)
            case = {}
            for path in paths:
                case[path] = {"n": len(rows[path]),
                              "first_byte": stats([first for first, _ in rows[path]]),
                              "total": stats([total for _, total in rows[path]])}
            for path in paths[1:]:
                for measure in ("first_byte", "total"):
                    for q in ("p50", "p99"):
                        mine, direct = case[path][measure][q], case["direct"][measure][q]
                        case[path][f"added_{measure}_{q}"] = None if mine is None or direct is None else mine - direct
            case["tally"]["gateway"] = stats(own)
            case["label"] = "text" if image is None else f"{os.path.basename(image)} ({os.path.getsize(image) / 1024:.0f} KiB)"
            report[f"{kind}@{concurrency}"] = case
            print(f"peers {case['label']} x{concurrency}: " + ", ".join(
                f"{p} {case[p]['n']} first {case[p]['first_byte']['p50']:.1f} total {case[p]['total']['p50']:.1f}"
                for p in paths if case[p]["n"]), file=sys.stderr)
    print(json.dumps({"cases": report, "connections": args.connections, "failures": failures[:10],
                      "failure_count": len(failures)}))


# ---------------------------------------------------------------- ab

def ab(args):
    """Rounds of every worker cycling dev-llm directly, Tally A and Tally B (one user's token each a worker): each
    round's first-byte p50 of the three and B - A, then their medians. Exit 1 when a call failed."""
    tokens = {"a": lines(args.tokens_a), "b": lines(args.tokens_b)}
    ports = {"direct": args.upstream_port, "a": args.port_a, "b": args.port_b}
    image = None if args.image == "text" else args.image
    bodies = {"direct": question(args.upstream_model, image, args.max_tokens, True),
              "a": question(args.model, image, args.max_tokens, True), "b": question(args.model, image, args.max_tokens, True)}
    paths = ["direct", "a", "b"]
    rounds, failures = [], []
    for _ in range(args.rounds):
        rows = {path: [] for path in paths}
        deadline = time.monotonic() + args.seconds

        def worker(i):
            turn = i
            while time.monotonic() < deadline:
                # direct, A, B, then direct, B, A: whichever comes second after direct is faster by ~0.1 ms here.
                cycle, step = divmod(turn, 3)
                path = (paths if cycle % 2 == 0 else ["direct", "b", "a"])[step]
                turn += 1
                key = args.upstream_key if path == "direct" else "tally:" + tokens[path][i % len(tokens[path])]
                answer = streamed(ports[path], bodies[path], key, path, failures)
                if answer is not None:
                    rows[path].append(answer[0])

        run_workers(worker, args.concurrency, args.seconds)
        p50 = {path: median(rows[path]) for path in paths}
        if None in p50.values():
            failures.append(f"round {len(rounds) + 1}: a path answered nothing")
            break
        rounds.append({"n": min(len(rows[path]) for path in paths), **p50, "b_minus_a": p50["b"] - p50["a"]})
        print(f"ab round {len(rounds)}: n {rounds[-1]['n']} direct {p50['direct']:.2f} a {p50['a']:.2f} b {p50['b']:.2f} "
              f"b-a {p50['b'] - p50['a']:+.3f} ms", file=sys.stderr)
    summary = {key: median([r[key] for r in rounds]) for key in paths + ["b_minus_a"]}
    print(json.dumps({"rounds": rounds, "median": summary, "failures": failures[:10], "failure_count": len(failures)}))
    return 1 if failures else 0


# ---------------------------------------------------------------- books

def books(args):
    admin = {"Authorization": "Bearer " + args.admin_key}
    problems = []
    users = held = captures = 0
    conn = http.client.HTTPConnection("127.0.0.1", args.admin_port, timeout=TIMEOUT)

    def get(path):
        conn.request("GET", path, headers=admin)
        resp = conn.getresponse()
        text = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"GET {path.split('?')[0]} answered {resp.status}: {text[:200]!r}")
        return json.loads(text)

    for user in lines(args.ids)[:args.users]:
        users += 1
        wallet = get(f"/admin/v1/users/{user}")["wallet"]
        entries, cursor = [], None
        while True:
            page = get(f"/admin/v1/users/{user}/entries?limit=100" + (f"&cursor={cursor}" if cursor else ""))
            entries.extend(page["items"])
            cursor = page.get("nextCursor")
            if not cursor:
                break
        balance = sum(e["amount"] for e in entries)
        held_sum = sum(e["heldChange"] for e in entries)
        if balance != wallet["balance"] or held_sum != wallet["held"]:
            problems.append(f"{user}: entries sum to {balance}/{held_sum}, wallet {wallet['balance']}/{wallet['held']}")
        if entries and entries[0]["balanceAfter"] != wallet["balance"]:
            problems.append(f"{user}: last balanceAfter {entries[0]['balanceAfter']} != {wallet['balance']}")
        held += wallet["held"]
        captures += sum(1 for e in entries if e["kind"] == "capture")
    if held:
        problems.append(f"{held} tokens still held")
    print(json.dumps({"users": users, "held": held, "captures": captures, "problems": problems[:10],
                      "ok": not problems}))


# ---------------------------------------------------------------- Markdown

MIB = 1 << 20
# The bound the image burst's RSS growth must meet. At most requestBytesInFlight bytes of bodies are admitted at once.
# While its call runs an admitted body lives once (the collected buffer: its messages are sent upstream from it and
# its images measured in it), plus the socket reads until collected and whatever the HTTP client holds until the
# answer is read; the bound allows five copies, from when the parse made strings and an upstream body of its own. The
# constant is the allocator's slack and the connections' buffers.
BODY_COPIES = 5
RSS_CONSTANT = 128 * MIB


def ms(value):
    return "—" if value is None else f"{value:.1f}"


def signed(value):
    return "—" if value is None else f"{value:+.1f}"


def render_images(args):
    r, b = json.loads(args.result), json.loads(args.books)
    d, g, f = r["direct"], r["gateway"], r["relay"]
    added = lambda x, q: None if x[q] is None or d[q] is None else x[q] - d[q]
    added_p99, added_p50 = added(g, "p99"), added(g, "p50")
    floor_p99, floor_p50 = added(f, "p99"), added(f, "p50")
    beyond = median(r["beyond_rounds"])
    own = r["gateway_own"]
    growth = r["rss_peak"] - r["rss_before"]
    bound = BODY_COPIES * args.bytes_in_flight + RSS_CONSTANT
    wallet = r["wallet_during"]
    answers_ok = r["failure_count"] == 0
    books_ok = b["ok"] and b["captures"] == g["n"]
    rss_ok = growth <= bound
    beyond_ok = beyond is not None and beyond <= 20
    bystander_ok = wallet['p99'] is not None and wallet['p99'] <= 50 and r['wallet_errors'] == 0
    verdict = lambda ok: "met" if ok else "**not met**"
    at_once = args.bytes_in_flight // r["body_bytes"]

    def cpu_ms(key, calls):
        return "—" if not calls else f"{r['cpu'][key] * 1000 / calls:.0f}"

    failures = "" if answers_ok else "\n\nFailures: " + "; ".join(dict.fromkeys(r["failures"]))
    print(f"""| {r['concurrency']} questions at once, each a {r['image_bytes'] / MIB:.1f} MiB PNG ({r['body_bytes'] / MIB:.1f} MiB body), {r['rounds']} bursts each way, alternated | direct to dev-llm | through Tally | added | target | verdict |
|---|---|---|---|---|---|
| total time p50 / p99 (ms), answered 200 (upload included) | {ms(d['p50'])} / {ms(d['p99'])} ({d['n']}) | {ms(g['p50'])} / {ms(g['p99'])} ({g['n']}) | p99 {signed(added_p99)} (p50 {signed(added_p50)}), the upload included | — | — |
| Tally's own time a call, as its `Server-Timing: gateway` says (the body read whole → the upstream request, the upstream's last byte → the answer: parse, checks, hold, capture; no upload), p50 / p99: a burst's bodies arrive together and queue for two cores, as dev-llm's do | — | {ms(own['p50'])} / {ms(own['p99'])} ({own['n']}{"" if not r['gateway_own_missing'] else f", **{r['gateway_own_missing']} without the header**"}) | — | — | — |
| added p99 beyond the upload, burst by burst: each round's p99 through Tally minus the relay's (below: the same second upload, nothing else), median of the rounds | vs direct: {", ".join(signed(x) for x in r['gateway_rounds'])} (median {signed(median(r['gateway_rounds']))}) | vs the relay: {", ".join(signed(x) for x in r['beyond_rounds'])} | median **{signed(beyond)}** | ≤ +20 ms | {verdict(beyond_ok)} |
| the floor: a relay in C (scripts/bench-lib/relay.c) that reads each body whole, then sends it on unchanged; the same budget ({r['relay_busy']} × `busy`) | {ms(d['p50'])} / {ms(d['p99'])} | {ms(f['p50'])} / {ms(f['p99'])} ({f['n']}) | p99 {signed(floor_p99)} (p50 {signed(floor_p50)}) | — | Tally ÷ relay, added p99: {"—" if not floor_p99 or added_p99 is None else f"{added_p99 / floor_p99:.1f}×"}; burst by burst {", ".join(signed(x) for x in r['relay_rounds'])}, median {signed(median(r['relay_rounds']))} |

| case | result | target | verdict |
|---|---|---|---|
| answers | direct {d['n']} × 200; Tally {g['n']} × 200, {r['gateway_busy']} × 503 `busy` (p50 {ms(r['gateway_busy_ms']['p50'])} ms; {at_once} bodies fit in `requestBytesInFlight`); other statuses or resets: {r['failure_count']} | every answer 200 or 503 `busy` | {verdict(answers_ok)} |
| server RSS before / peak / after (every 100 ms, {r['rss_samples']} samples) | {r['rss_before'] / MIB:.1f} / {r['rss_peak'] / MIB:.1f} / {r['rss_after'] / MIB:.1f} MiB: growth **{growth / MIB:.1f} MiB** | ≤ {BODY_COPIES} × `requestBytesInFlight` + {RSS_CONSTANT // MIB} MiB = {bound / MIB:.0f} MiB | {verdict(rss_ok)} |
| CPU a call (the processes' user + system time over the bursts ÷ answered calls) | Tally {cpu_ms('gateway tally', g['n'])} ms an answered gateway call (its `busy` answers' drained bodies included), the relay {cpu_ms('relay relay', f['n'])} ms a relayed call (likewise); dev-llm {cpu_ms('direct dev-llm', d['n'])} ms a direct call, {cpu_ms('gateway dev-llm', g['n'])} ms a call through Tally | — | — |
| a bystander's `GET /v1/wallet` during the Tally bursts, p50 / p99 ({wallet['n']} calls) | {ms(wallet['p50'])} / {ms(wallet['p99'])} ms; errors {r['wallet_errors']} | p99 ≤ 50 ms | {verdict(bystander_ok)} |
| books after the burst | {b['users']} users: every ledger sums to its wallet, {b['held']} held, {b['captures']} captures for {g['n']} answers | balanced | {verdict(books_ok)} |{failures}""")
    # Every verdict of the table decides (a target missed fails the run, as the peers' ratio does).
    return 0 if answers_ok and books_ok and rss_ok and beyond_ok and bystander_ok else 1


def render_peers(args):
    r, b = json.loads(args.result), json.loads(args.books)
    lines_ = ["| case | measure | direct p50 / p99 | floor: C relay p50 / p99 | stack: Hummingbird + AsyncHTTPClient p50 / p99 "
              "| Tally p50 / p99 | LiteLLM p50 / p99 | added p50: floor / stack / Tally / LiteLLM | LiteLLM ÷ Tally | ≥ 10× |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    ok = r["failure_count"] == 0
    answered = 0
    for name, case in r["cases"].items():
        concurrency = name.rsplit("@", 1)[1]
        answered += case["tally"]["n"]
        calls = " / ".join(str(case[p]["n"]) for p in PEER_PATHS)
        label = f"{concurrency} streams, {case['label']} ({calls} calls)"
        for measure, title in (("first_byte", "first byte"), ("total", "total")):
            floor, stack = case["relay"][f"added_{measure}_p50"], case["stack"][f"added_{measure}_p50"]
            mine, theirs = case["tally"][f"added_{measure}_p50"], case["litellm"][f"added_{measure}_p50"]
            met = mine is not None and theirs is not None and theirs > 0 and mine * 10 <= theirs
            ok = ok and met
            ratio = "—" if not mine or theirs is None else (f"{theirs / mine:.1f}×" if mine > 0 else "Tally ≤ 0")
            cells = [f"{ms(case[p][measure]['p50'])} / {ms(case[p][measure]['p99'])}" for p in PEER_PATHS]
            lines_.append(f"| {label} | {title} (ms) | {' | '.join(cells)} | {signed(floor)} / {signed(stack)} / {signed(mine)} / {signed(theirs)} "
                          f"| {ratio} | {'met' if met else '**not met**'} |")
    books_ok = b["ok"] and b["captures"] == answered
    ok = ok and books_ok
    lines_.append("")
    lines_.append("Tally's own time a call, as its `Server-Timing: gateway` says (the body read whole → the upstream request: "
                  "parse, checks, hold; no upload), p50 / p99 ms: " + "; ".join(
                      f"{case['label'].split(' (')[0]} × {name.rsplit('@', 1)[1]} {ms(case['tally']['gateway']['p50'])} / "
                      f"{ms(case['tally']['gateway']['p99'])}" for name, case in r["cases"].items() if "gateway" in case["tally"]) + ".")
    lines_.append("")
    lines_.append(f"LiteLLM {args.litellm_version}'s proxy, one worker, no database. The floor: scripts/bench-lib/relay.c, which "
                  "reads each body whole and sends it on unchanged (the second upload that any gateway pays which must see "
                  "the whole body before calling; nothing else). The stack: `tally-dev bare-proxy`, Hummingbird and "
                  "AsyncHTTPClient relaying each body (read whole into one buffer) and streaming the answer back, with none of "
                  "Tally's work (no token, parse, hold or capture): what Tally's HTTP stack alone costs a call. "
                  f"Streams of 20 tokens {args.token_ms} ms apart; every worker cycles the five paths"
                  + (", keeping a connection to each (as an app's HTTP client does)" if r.get("connections") == "reused"
                     else ", a new connection a call")
                  + ". Calls other than 200: "
                  f"{r['failure_count']}{' (' + '; '.join(dict.fromkeys(r['failures'])) + ')' if r['failures'] else ''}. Tally's books: "
                  f"{b['users']} users, {b['held']} held, {b['captures']} captures for {answered} answers "
                  f"({'balanced' if books_ok else '**not balanced**'}).")
    print("\n".join(lines_))
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("png")
    p.add_argument("--bytes", type=int, default=8 << 20)
    p.add_argument("--side", type=int)
    p.add_argument("--out", required=True)
    for name in ("images", "peers"):
        p = sub.add_parser(name)
        p.add_argument("--port", type=int, required=True, help="tally serve's API port")
        p.add_argument("--relay-port", type=int, required=True, help="scripts/bench-lib/relay.c's port, on dev-llm")
        p.add_argument("--upstream-port", type=int, required=True, help="tally-dev dev-llm's port")
        p.add_argument("--upstream-key", required=True)
        p.add_argument("--tokens", required=True, help="user access tokens, one a line")
        p.add_argument("--image", required=True, help="an image file (peers: comma-separated, one case each)")
        p.add_argument("--model", default="vision")
        p.add_argument("--upstream-model", default="dev")
        p.add_argument("--max-tokens", type=int, default=20)
    p = sub.choices["images"]
    p.add_argument("--server-pid", type=int, required=True)
    p.add_argument("--upstream-pid", type=int, required=True, help="tally-dev dev-llm's pid (its CPU time)")
    p.add_argument("--relay-pid", type=int, required=True, help="the relay's pid (its CPU time)")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--pause", type=float, default=0.5)
    p.add_argument("--settle", type=float, default=3)
    p.add_argument("--bystander-rate", type=float, default=20)
    p.add_argument("--bystander-out", required=True)
    p = sub.choices["peers"]
    p.add_argument("--litellm-port", type=int, required=True)
    p.add_argument("--stack-port", type=int, required=True, help="`tally-dev bare-proxy`'s port, on dev-llm")
    p.add_argument("--litellm-key", required=True)
    p.add_argument("--concurrency", type=lambda s: [int(c) for c in s.split(",")], default=[6, 32])
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--connections", choices=["reused", "fresh"], default="reused",
                   help="each worker keeps a connection a path, as an app's HTTP client does (reused), or opens one a call")
    p = sub.add_parser("ab")
    p.add_argument("--port-a", type=int, required=True)
    p.add_argument("--port-b", type=int, required=True)
    p.add_argument("--tokens-a", required=True)
    p.add_argument("--tokens-b", required=True)
    p.add_argument("--upstream-port", type=int, required=True)
    p.add_argument("--upstream-key", required=True)
    p.add_argument("--image", default="text", help="an image file, or text")
    p.add_argument("--model", default="vision")
    p.add_argument("--upstream-model", default="dev")
    p.add_argument("--max-tokens", type=int, default=1)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p = sub.add_parser("books")
    p.add_argument("--admin-port", type=int, required=True)
    p.add_argument("--admin-key", required=True)
    p.add_argument("--ids", required=True)
    p.add_argument("--users", type=int, default=1 << 30)
    p = sub.add_parser("bystander")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--rate", type=float, default=20)
    p.add_argument("--limit", type=float, default=600)
    p.add_argument("--out", required=True)
    for name in ("render-images", "render-peers"):
        p = sub.add_parser(name)
        p.add_argument("--result", required=True, help="the images or peers command's JSON")
        p.add_argument("--books", required=True, help="the books command's JSON")
    sub.choices["render-images"].add_argument("--bytes-in-flight", type=int, required=True)
    sub.choices["render-peers"].add_argument("--token-ms", type=int, required=True)
    sub.choices["render-peers"].add_argument("--litellm-version", default="?")
    args = parser.parse_args()
    commands = {"png": png, "images": images, "peers": peers, "ab": ab, "books": books, "bystander": bystander,
                "render-images": render_images, "render-peers": render_peers}
    sys.exit(commands[args.command](args) or 0)


if __name__ == "__main__":
    main()
