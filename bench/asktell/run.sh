#!/usr/bin/env bash
# Ask/tell overhead, side by side in one invocation: one Python client doing 2,000 ask/tell pairs
# of a trivial objective against a live `sextant run` (search.mode ask_tell, random sampler,
# through the Python client in clients/python), against Optuna 3.1's and Optuna 5's ask/tell
# (RandomSampler) with in-memory storage and with SQLite storage, each Optuna repeat in a process
# of its own; and, with a model, Sextant's bayesian sampler against Optuna 5's GPSampler for
# --model-pairs pairs. Reports pairs per second (median over the repeats), the ratios to Optuna
# 3.1's and 5's SQLite, and the p50 and p99 of one ask. Writes the table to stdout and every
# repeat to bench/asktell/raw.jsonl.
#
# usage: bench/asktell/run.sh BUILD_DIR [--pairs N (2000)] [--model-pairs N (100)]
#                             [--repeats R (3)] [--systems LIST] [--optuna5 DIR] [--work DIR]
#   --systems: sextant,memory,sqlite,o5-memory,o5-sqlite,sextant-bayesian,o5-gp (o5-* = Optuna 5)
#   --optuna5: Optuna 5's source folder, the one holding optuna/ (default $SEXTANT_OPTUNA5, else
#              /work/shared/peers/optuna5); the run stops with a clear message when it is absent
#   BUILD_DIR: the CMake build directory, with bin/sextant and python/sextant
#              (ninja -C BUILD_DIR sextant sextant-worker sextant_python)
set -euo pipefail
if [[ $# -lt 1 || "$1" == -* ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
BUILD=$(cd "$1" && pwd)
shift
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=/usr/bin/python3   # Debian's python with python3-grpcio and python3-optuna 3.1
if ! "$PY" -c 'import optuna, grpc' 2>/dev/null; then
  echo "run.sh: $PY lacks python3-optuna or python3-grpcio (scripts/install-deps --bench)" >&2
  exit 2
fi
[[ -d "$BUILD/python/sextant" ]] || { echo "run.sh: no $BUILD/python/sextant (ninja -C $BUILD sextant_python)" >&2; exit 2; }
PYTHONPATH="$BUILD/python" exec "$PY" "$HERE/asktell_bench.py" "$BUILD" --repeats 3 "$@"
