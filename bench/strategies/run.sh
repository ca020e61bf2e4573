#!/usr/bin/env bash
# Multi-objective suggestion latency at 200 observations in 6-D, side by side in one run:
# Sextant's bayesian sampler (EHVI; Google Benchmark, medians of 5 repetitions) and Optuna 3.1's
# multi-objective samplers (medians of 20 asks). Usage: bench/strategies/run.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
ninja -C "$build" mo_bayesian_bench >/dev/null
echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
"$build/bench/mo_bayesian_bench" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  2>/dev/null | grep -E '^(Benchmark|BM_.*_median)' 
/usr/bin/python3 "$here/mo_suggest_peer.py"
