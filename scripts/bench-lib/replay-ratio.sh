#!/usr/bin/env bash
# The purchase replay's ratio to the wallet GET, on one server, quickly: a release `tally serve` (SQLite, or
# PostgreSQL when DATABASE_URL is set, e.g. under scripts/with-postgres) trusting a CA of `tally-dev bench-purchases ca`,
# 1,000 guests, one consumable each redeemed, then wrk (64 connections, 8 s each) on GET /v1/wallet and on
# POST /v1/purchases/apple replays, twice; the second round is reported. Alternate two binaries to compare them in
# one machine state. scripts/bench measures the same cases (and more) for BENCHMARKS.md.
#
# usage: BIN=<release tally> scripts/bench-lib/replay-ratio.sh [perf]   (perf: record the server during round 2's
#        replays into $PERF_OUT, default ./replay.perf.data; DEV_BIN: the tally-dev that signs, default: beside BIN)
set -Eeuo pipefail
LIB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN=${BIN:?set BIN to a release tally binary}
DEV_BIN=${DEV_BIN:-$(dirname "$BIN")/tally-dev}
[ -x "$DEV_BIN" ] || { echo "no tally-dev at $DEV_BIN (swift build -c release --product tally-dev, or set DEV_BIN)" >&2; exit 2; }
PERF_OUT=${PERF_OUT:-$PWD/replay.perf.data}
D=$(mktemp -d "${TMPDIR:-/tmp}/replay-ratio.XXXXXX")
KEY=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
ROOT=$("$DEV_BIN" bench-purchases ca --certs "$D/appstore")
cat >"$D/config.json" <<JSON
{"signupGrant": 0, "guestSignupsPerIPPerHour": 100000000, "quotas": [], "actions": [{"name": "bench.debit", "tokens": 1}],
 "appStore": {"bundleId": "com.example.bench", "environments": ["Sandbox"], "rootCertificates": ["$ROOT"],
  "products": [{"productId": "bench.tokens100", "tokens": 100}]},
 "limits": {"purchasesPerUser": {"limit": 1000000000, "seconds": 60}}}
JSON
TALLY_ADMIN_KEY=$KEY TALLY_CONFIG=$D/config.json "$BIN" serve --host 127.0.0.1 --port 0 --admin-port 0 --data-dir "$D/data" \
  --backlog 4096 --max-connections-per-ip 0 >"$D/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait 2>/dev/null; rm -rf "$D"' EXIT
port="" admin=""
for _ in $(seq 600); do
  port=$(sed -n 's|^tally listening on http://127\.0\.0\.1:\([0-9]*\) .*|\1|p' "$D/server.log" | head -1)
  admin=$(sed -n 's|^tally admin listening on http://127\.0\.0\.1:\([0-9]*\) .*|\1|p' "$D/server.log" | head -1)
  [ -n "$port" ] && [ -n "$admin" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$D/server.log" >&2; exit 1; }
python3 "$LIB/tally_bench.py" seed --port "$port" --admin-port "$admin" --admin-key "$KEY" --users 1000 --grant 1000000000 \
  --tokens "$D/tokens.txt" --ids "$D/users.txt" >&2
"$DEV_BIN" bench-purchases sign --certs "$D/appstore" --ids "$D/users.txt" --tokens "$D/tokens.txt" --count 1000 --out "$D/purchases.tsv" >&2
python3 "$LIB/tally_bench.py" redeem --port "$port" --purchases "$D/purchases.tsv" --count 1000 >&2
for round in 1 2; do
  wallet=$(TOKENS_FILE=$D/tokens.txt BENCH_METHOD=GET BENCH_PATH=/v1/wallet wrk --latency -t1 -c64 -d8s -s "$LIB/tally.lua" \
    "http://127.0.0.1:$port")
  recorder=""
  if [ "${1:-}" = perf ] && [ "$round" = 2 ]; then
    perf record -F 999 -g -p "$SERVER" -o "$PERF_OUT" -- sleep 6 >/dev/null 2>&1 & recorder=$!
  fi
  replay=$(PURCHASES_FILE=$D/purchases.tsv BENCH_THREADS=1 PURCHASE_MODE=replay PURCHASE_FROM=0 PURCHASE_COUNT=1000 \
    wrk --latency -t1 -c64 -d8s -s "$LIB/purchase.lua" "http://127.0.0.1:$port")
  [ -z "$recorder" ] || wait "$recorder" || true
done
w=$(awk '/Requests\/sec/ { print $2 }' <<<"$wallet"); r=$(awk '/Requests\/sec/ { print $2 }' <<<"$replay")
rp99=$(awk '$1 == "99%" { print $2 }' <<<"$replay"); errors=$(grep -c "Non-2xx" <<<"$replay" || true)
printf 'wallet %s req/s; replay %s req/s, p99 %s, non-2xx lines %s; replay/wallet %.2f\n' "$w" "$r" "$rp99" "$errors" \
  "$(awk -v r="$r" -v w="$w" 'BEGIN { print r / w }')"
