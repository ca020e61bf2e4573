#!/bin/sh
# 64 workers report every 100 ms for 2 minutes to one orchestrator; prints acknowledged vs
# stored counts and report latency percentiles.
#   bench/load/run.sh [BUILD_DIR] [WORKERS] [SECONDS] [INTERVAL_MS]
set -eu
build=${1:-build}
echo "load before: $(uptime)"
"$build/bench/load_bench" "$build/bin/sextant" "${TMPDIR:-/tmp}/sextant-load" "${2:-64}" \
  "${3:-120}" "${4:-100}"
echo "load after: $(uptime)"
