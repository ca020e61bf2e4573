#!/usr/bin/env bash
# Secure aggregation cost: one SecAgg+ round per configuration (n in {10, 100, 500},
# d in {1e5, 1e6}, dropouts 0/10/30% after key sharing), 16-bit quantisation, the machine's
# ChaCha20 throughput measured in each process and the PRG-bound minimum. Single-threaded, thread
# CPU time. Writes bench/secagg/RESULTS.md and keeps the raw lines in bench/secagg/raw.txt.
#   bench/secagg/run.sh [BUILD_DIR]        (default: build; takes about 10 minutes)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
bench=$build/bench/secagg_bench
[[ -x $bench ]] || { echo "build first: cmake --build $build --target secagg_bench" >&2; exit 1; }
raw=$here/raw.txt
: > "$raw"
echo "load_before $(cut -d' ' -f1-3 /proc/loadavg)" >> "$raw"
"$bench" chacha | tee -a "$raw"
for d in 1e5 1e6; do
  for n in 10 100 500; do
    for f in 0 0.1 0.3; do
      "$bench" round --n "$n" --d "$d" --dropout "$f" | tee -a "$raw"
    done
  done
done
"$bench" chacha | tee -a "$raw"
echo "load_after $(cut -d' ' -f1-3 /proc/loadavg)" >> "$raw"
/usr/bin/python3 "$here/report.py" "$raw" > "$here/RESULTS.md"
cat "$here/RESULTS.md"
