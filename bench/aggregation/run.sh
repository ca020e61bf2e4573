#!/usr/bin/env bash
# Aggregation throughput, side by side in one run: Sextant's weighted FedAvg
# (federation/weighted_average.h) vs a Flower-style numpy aggregate vs a STREAM-style copy.
# Sextant and the copy run on one thread and on every core (nproc threads); numpy is
# single-threaded, as Flower runs it. Writes bench/aggregation/RESULTS.md and keeps the raw lines in
# bench/aggregation/raw.txt.
#   bench/aggregation/run.sh [BUILD_DIR] [SWEEPS]     (defaults: build, 3)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
sweeps=${2:-3}
bench=$build/bench/aggregation_bench
py=/usr/bin/python3
[[ -x $bench ]] || { echo "build first: cmake --build $build --target aggregation_bench" >&2; exit 1; }
raw=$here/raw.txt
: > "$raw"
echo "load_before $(cut -d' ' -f1-3 /proc/loadavg)" >> "$raw"
# Each sweep runs every configuration once; the sweeps interleave the implementations so that
# a burst of load from elsewhere hits all of them.
cores=$(nproc)
for s in $(seq "$sweeps"); do
  for t in 1 "$cores"; do "$bench" copy --reps 9 --threads "$t" | tee -a "$raw"; done
  for nd in "10 1e6" "100 1e6" "10 1e7" "100 1e7"; do
    set -- $nd
    echo "load $(cut -d' ' -f1 /proc/loadavg)" >> "$raw"
    for t in 1 "$cores"; do
      "$bench" fedavg --n "$1" --d "$2" --mode batch --reps 7 --threads "$t" | tee -a "$raw"
      "$bench" fedavg --n "$1" --d "$2" --mode stream --reps 5 --threads "$t" | tee -a "$raw"
    done
    # The fold's access pattern without its arithmetic: as many streams as it reads at once.
    streams=$(( $1 <= 12 ? $1 : 8 ))
    "$bench" read --streams "$streams" --d "$2" --reps 7 --threads "$cores" | tee -a "$raw"
    "$py" "$here/numpy_peer.py" --n "$1" --d "$2" --reps 5 2>&1 | tee -a "$raw" \
      || echo "bench=fedavg impl=numpy_flower n=$1 d=$2 failed=1" | tee -a "$raw"
  done
done
for t in 1 "$cores"; do "$bench" copy --reps 9 --threads "$t" | tee -a "$raw"; done
echo "load_after $(cut -d' ' -f1-3 /proc/loadavg)" >> "$raw"
"$py" "$here/report.py" "$raw" "$root" > "$here/RESULTS.md"
cat "$here/RESULTS.md"
