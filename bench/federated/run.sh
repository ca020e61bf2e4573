#!/usr/bin/env bash
# Buffered asynchronous rounds (federation.mode: buffered) against synchronous FedAvg: wall time
# to 0.85 validation accuracy with the built-in CNN, 2 regions x 5 clients on non-IID
# Fashion-MNIST, 3 clients 5x slower; medians over 3 runs of each, alternated.
# usage: bench/federated/run.sh BUILD_DIR [--runs N] [--first-seed S] [--target A] [--wall 8m]
#          [--work DIR] [--secure]
#          (--secure: both modes under secure aggregation; each buffer one SecAgg instance)
#        bench/federated/run.sh BUILD_DIR --compression [--compression-rounds 20]: the
#          update_compression table (none, fp16, int8; synchronous, no stragglers)
#        bench/federated/run.sh BUILD_DIR --compression --secure: none and int8 under secure
#          aggregation
#   BUILD_DIR holds bin/sextant and bin/sextant-worker (ninja -C BUILD_DIR sextant sextant-worker)
# About 25 minutes on 2 cores. Appends each run to bench/federated/runs.jsonl and prints the
# table of bench/federated/RESULTS.md.
set -euo pipefail
if [[ $# -lt 1 || "$1" == -* ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec /usr/bin/python3 "$HERE/federated_bench.py" "$@"
