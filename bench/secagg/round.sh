#!/usr/bin/env bash
# Round time of secure vs plaintext aggregation through the real transport: one region of n=100
# clients (threads of one process) and its aggregator on loopback, d=10^6, the two paths
# alternating 3 times in the same run. Keeps the raw lines in bench/secagg/round_raw.txt and
# regenerates bench/secagg/RESULTS.md (report.py adds the round-time table).
#   bench/secagg/round.sh [BUILD_DIR]      (default: build; takes about 6 minutes)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
bench=$build/bench/secagg_round_bench
[[ -x $bench ]] || { echo "build first: cmake --build $build --target secagg_round_bench" >&2; exit 1; }
raw=$here/round_raw.txt
: > "$raw"
echo "load_before $(cut -d' ' -f1-3 /proc/loadavg)" >> "$raw"
"$bench" --n 100 --d 1e6 --reps 3 | tee -a "$raw"
echo "load_after $(cut -d' ' -f1-3 /proc/loadavg)" >> "$raw"
/usr/bin/python3 "$here/report.py" "$here/raw.txt" > "$here/RESULTS.md"
cat "$here/RESULTS.md"
