#!/usr/bin/env bash
# memprobe.sh measures the peak memory of `contextrouter serve` across hot
# reloads under query load, on 127.0.0.1 only.
#
#   hack/memprobe.sh BINARY [SWAPS] [serve flags...]
#   hack/memprobe.sh bin/contextrouter 20 --memory-limit 256Mi
#   GOGC=100 hack/memprobe.sh bin/contextrouter 20
#
# The configuration alternates SWAPS times between the quickstart (a live heap
# of a few MB) and the quickstart plus a Directory source of 800 generated
# documents (about 16 MB of text), each swap waiting for the new snapshot to
# serve, while hack/loadgen sends queries over 4 connections. It prints the
# peak resident set (VmHWM), the server's CPU time, the queries answered and
# those not answered 200, and the memory limit serve logged.
set -euo pipefail

BIN=$(realpath "$1"); N=${2:-20}; shift; [ $# -gt 0 ] && shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

(cd "$ROOT" && go build -o "$WORK/loadgen" ./hack/loadgen)
CFG=$WORK/cfg
mkdir -p "$CFG/docs/big"
cp "$ROOT"/examples/quickstart/*.yaml "$CFG/"
cp -r "$ROOT"/examples/quickstart/docs/. "$CFG/docs/"
# hr-assistant may read the large source while it is configured.
sed -i 's/allowSources: \[system-prompt, hr-docs\]/allowSources: [system-prompt, hr-docs, big-docs]/' "$CFG/permissions.yaml"
awk -v dir="$CFG/docs/big" 'BEGIN {
  srand(7)
  split("ka lo mi ne ru sa ti vo pe da gri flo zen mar tul bex quo rin sho wat", syl, " ")
  for (v = 0; v < 40000; v++) { w = ""; k = 2 + int(rand() * 3); for (j = 0; j < k; j++) w = w syl[1 + int(rand() * 20)]; vocab[v] = w }
  for (d = 0; d < 800; d++) {
    f = sprintf("%s/doc%04d.md", dir, d)
    for (s = 0; s < 6; s++) {
      printf "# Section %d of document %d\n\n", s, d > f
      line = ""; for (j = 0; j < 300; j++) line = line vocab[int(rand() * 40000)] " "
      print line "\n" > f
    }
    close(f)
  }
}'
cat > "$CFG/big.yaml.off" <<'EOF'
apiVersion: contextrouter.dev/v1alpha1
kind: ContextSource
metadata: {name: big-docs}
spec:
  type: Directory
  sensitivity: Internal
  directory: {path: docs/big, include: ["**/*.md"]}
---
apiVersion: contextrouter.dev/v1alpha1
kind: ContextRoute
metadata: {name: big}
spec:
  parentRefs: [{name: acme}]
  sources: [{name: big-docs}]
EOF

PORT=$((20000 + RANDOM % 10000))
LOG=$WORK/serve.log
"$BIN" serve -f "$CFG" --listen "127.0.0.1:$PORT" --cache-dir "$WORK/cache" --log-format text --log-level info "$@" 2>"$LOG" &
PID=$!
for _ in $(seq 600); do curl -sf "127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.1; done
"$WORK/loadgen" -url "http://127.0.0.1:$PORT/v1/query" -c 4 -d 3600s -warmup 0s >/dev/null 2>&1 &
LOAD=$!
swapped() { grep -c "snapshot serving" "$LOG" || true; }
start=$SECONDS
for _ in $(seq "$N"); do
  before=$(swapped)
  if [ -f "$CFG/big.yaml" ]; then mv "$CFG/big.yaml" "$CFG/big.yaml.off"; else mv "$CFG/big.yaml.off" "$CFG/big.yaml"; fi
  for _ in $(seq 1200); do [ "$(swapped)" -gt "$before" ] && break; sleep 0.05; done
  sleep 1
done
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$PID/status")
ticks=$(awk '{print $14 + $15}' "/proc/$PID/stat")
kill "$LOAD"; wait "$LOAD" 2>/dev/null || true
metrics=$(curl -s "127.0.0.1:$PORT/metrics")
queries=$(awk '/^contextrouter_query_duration_seconds_count/ {print $2}' <<<"$metrics")
failed=$(awk '/^contextrouter_http_requests_total\{/ && /handler="query"/ && !/code="200"/ {s += $2} END {print s + 0}' <<<"$metrics")
kill -TERM "$PID"; wait "$PID" || true
echo "swaps=$N seconds=$((SECONDS - start)) peak_rss=$((hwm / 1024))MiB cpu_seconds=$((ticks / $(getconf CLK_TCK))) queries=$queries non_200=$failed"
grep -m1 -o 'msg="memory limit".*\|msg="no memory limit.*' "$LOG" || true
