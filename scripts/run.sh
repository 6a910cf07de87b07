#!/usr/bin/env bash
# `make run`: two Envoys with floodgate (local mode, and global mode asking
# floodgate-server), in front of a demo upstream that prints every request reaching it.
# Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."

ENVOY=.venv/bin/envoy
mkdir -p .run
pids=()
cleanup() {
    trap - EXIT INT TERM
    kill "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    echo "stopped."
}
trap cleanup EXIT
trap 'cleanup; exit 0' INT TERM

wait_for() { # wait_for URL EXPECTED WHAT
    for _ in $(seq 1 300); do
        [ "$(curl -s "$1" 2>/dev/null)" = "$2" ] && return 0
        sleep 0.1
    done
    echo "$3 did not come up; see .run/*.log" >&2
    exit 1
}

target/debug/demo-upstream 127.0.0.1:10080 &
pids+=($!)
target/debug/floodgate-server --config examples/global/ratelimit.yaml \
    --grpc-addr 127.0.0.1:8081 --http-addr 127.0.0.1:8080 2>.run/floodgate-server.log &
pids+=($!)
"$ENVOY" -c examples/local/envoy.yaml --concurrency 2 --disable-hot-restart \
    --log-path .run/envoy-local.log &
pids+=($!)
"$ENVOY" -c examples/global/envoy.yaml --concurrency 2 --disable-hot-restart \
    --log-path .run/envoy-global.log &
pids+=($!)
wait_for http://127.0.0.1:8080/healthz ok "floodgate-server"
wait_for http://127.0.0.1:9901/ready LIVE "Envoy (local mode)"
wait_for http://127.0.0.1:9902/ready LIVE "Envoy (global mode)"

cat <<'TXT'

floodgate is running.

Local mode (examples/local/envoy.yaml, listener 127.0.0.1:10000): 5 requests per
tenant, then 1 more per second. Watch 200s turn into 429s:

  for i in $(seq 8); do curl -s -o /dev/null -w '%{http_code}\n' -H 'x-tenant-id: acme' localhost:10000/; done
  curl -i -H 'x-tenant-id: acme' localhost:10000/          # retry-after, x-ratelimit-*
  curl -i -H 'x-tenant-id: globex' localhost:10000/        # another tenant: its own bucket

Global mode (examples/global/envoy.yaml, listener 127.0.0.1:10001): 10 requests per
minute per tenant, decided by floodgate-server (examples/global/ratelimit.yaml) for every
Envoy asking it, after a local burst limit of 50 per client (10 more per second):

  for i in $(seq 12); do curl -s -o /dev/null -w '%{http_code}\n' -H 'x-tenant-id: acme' localhost:10001/; done
  curl -i -H 'x-tenant-id: acme' localhost:10001/          # 429 from the global limit
  curl -i -H 'x-tenant-id: big' -H 'x-cost: 10' localhost:10001/   # one request worth 10

A leased limit (6 000 per minute per API key, leased 100 at a time): the first request
calls floodgate-server and gets a grant of 100 hits, the next 14 spend it with no call
(the counters flush once a second):

  for i in $(seq 15); do curl -s -o /dev/null -w '%{http_code}\n' -H 'x-api-key: demo' localhost:10001/; done
  sleep 2; curl -s localhost:9902/stats | grep -E 'floodgate\.lease\.(allowed|grants):'   # 14 from the lease, 1 grant

Metrics, as Prometheus scrapes them:

  curl -s localhost:9901/stats/prometheus | grep '^floodgate_'     # local Envoy
  curl -s localhost:9902/stats/prometheus | grep '^floodgate_'     # global Envoy
  curl -s localhost:8080/metrics | grep '^floodgate_'              # floodgate-server

Every indented line above can be pasted as it is, top to bottom (make test does).
Logs are in .run/. Ctrl-C stops everything.

TXT
wait
