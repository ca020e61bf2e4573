#!/bin/sh
# Simulate scale benchmark (see bench/simulate/RESULTS.md). usage: bench/simulate/run.sh [BIN_DIR]
# (default build/bin). Extra arguments pick cells, e.g. 100000x10000. Run directories, the
# generated catalog and experiments go to $OUT (default /tmp/sextant-simulate-bench); every
# run's printed output to raw.txt there and here.
set -e
BIN=${1:-build/bin}
[ $# -gt 0 ] && shift
HERE=$(dirname "$0")
OUT=${OUT:-/tmp/sextant-simulate-bench}
/usr/bin/python3 "$HERE/bench.py" "$BIN" "$OUT" "$@"
cp "$OUT/raw.txt" "$HERE/raw.txt"
