#!/bin/sh
# Cost benchmark (see bench/cost/RESULTS.md): 500-trial ASHA on 32 GPUs under `sextant simulate`,
# three seeds per cell (medians). usage: bench/cost/run.sh [BIN_DIR]   (default build/bin)
# Run directories go to $OUT (default /tmp/sextant-cost-bench); the printed output to raw.txt.
set -e
BIN=${1:-build/bin}
HERE=$(dirname "$0")
OUT=${OUT:-/tmp/sextant-cost-bench}
/usr/bin/python3 "$HERE/bench.py" "$BIN" "$OUT"
cp "$OUT/raw.txt" "$HERE/raw.txt"
