#!/usr/bin/env bash
# The console's pages against a seeded database of 100,000 users and 1,000,000 ledger entries over the last 7 days, for
# the requirement "the console pages answer in ≤ 50 ms p99": `tally migrate` on a fresh store, the seed written straight
# into it (SQLite: the stopped database's file; PostgreSQL: COPY through psql), then `tally serve` and, from one client
# on one keep-alive connection, the first overview, then N sequential requests per page after a warm-up (overview,
# newest users and their next page, a 10,000-entry user and that user's 101st ledger page through the "Older" links,
# random users, find by email and by transaction id, audit) and 30 s of continuous overview reads. Prints a markdown
# table (p50/p99/max ms) and the load average at start and end; exits non-zero on any unexpected answer.
# See scripts/bench-lib/console_bench.py for what is seeded and measured.
#
# usage: BIN=<release tally> scripts/bench-lib/console-bench.sh [sqlite|postgres]
#   postgres runs itself under scripts/with-postgres (a throwaway PostgreSQL 15 cluster) unless DATABASE_URL is set.
#   REQUESTS (default 300), WARMUP (20), DURATION (30: seconds of continuous overview), PG_BIN (/usr/lib/postgresql/15/bin),
#   KEEP_WORK=1 keeps the work directory (database, server log).
set -Eeuo pipefail
LIB="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STORE=${1:-sqlite}
BIN=${BIN:?set BIN to a tally binary (a release build for real numbers)}
log() { printf '[console-bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
case "$STORE" in
  sqlite) unset DATABASE_URL ;;
  postgres) [ -n "${DATABASE_URL:-}" ] || exec "$LIB/../with-postgres" "${BASH_SOURCE[0]}" postgres ;;
  *) echo "usage: BIN=<tally> $0 [sqlite|postgres]" >&2; exit 2 ;;
esac
PSQL=${PG_BIN:-/usr/lib/postgresql/15/bin}/psql
D=$(mktemp -d "${TMPDIR:-/tmp}/console-bench.XXXXXX")
SERVER=""
cleanup() {
  [ -z "$SERVER" ] || { kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null; }
  if [ -n "${KEEP_WORK:-}" ]; then log "kept $D"; else rm -rf "$D"; fi
}
trap cleanup EXIT
log "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); binary $BIN; store $STORE"

"$BIN" migrate --data-dir "$D/data" >&2
log "seeding"
if [ "$STORE" = sqlite ]; then
  python3 "$LIB/console_bench.py" seed --store sqlite --sqlite "$D/data/tally.sqlite" --targets "$D/targets.json"
else
  python3 "$LIB/console_bench.py" seed --store postgres --psql "$PSQL" --url "$DATABASE_URL" --targets "$D/targets.json"
fi

read -r PORT ADMIN_PORT < <(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))')
KEY=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
printf 'signupGrant: 0\n' >"$D/tally.yaml"
TALLY_ADMIN_KEY=$KEY TALLY_CONFIG=$D/tally.yaml "$BIN" serve --host 127.0.0.1 --port "$PORT" --admin-port "$ADMIN_PORT" \
  --data-dir "$D/data" >"$D/server.log" 2>&1 &
SERVER=$!
for _ in $(seq 600); do
  curl -sf -o /dev/null "http://127.0.0.1:$ADMIN_PORT/health" && break
  kill -0 "$SERVER" 2>/dev/null || { tail -n 30 "$D/server.log" >&2; log "the server exited"; exit 1; }
  sleep 0.1
done
curl -sf -o /dev/null "http://127.0.0.1:$ADMIN_PORT/health" || { tail -n 30 "$D/server.log" >&2; log "no /health"; exit 1; }
log "tally serve up (admin :$ADMIN_PORT); measuring"
python3 "$LIB/console_bench.py" measure --admin "http://127.0.0.1:$ADMIN_PORT" --key "$KEY" --targets "$D/targets.json" \
  --label "$STORE, $(basename "$BIN") $(dirname "$BIN" | xargs basename)" --requests "${REQUESTS:-300}" --warmup "${WARMUP:-20}" \
  --seconds "${DURATION:-30}" || { tail -n 20 "$D/server.log" >&2; exit 1; }
