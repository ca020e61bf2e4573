#!/usr/bin/env bash
# Multi-fidelity benchmark, side by side in one run: best validation accuracy against epochs
# consumed on examples/fashion-mnist/train.py (numpy MLP, Fashion-MNIST) for full-fidelity random
# search, Sextant's asha, hyperband and bohb schedulers, and Optuna 3.1's and Optuna 5's
# TPESampler with SuccessiveHalvingPruner and HyperbandPruner (each Optuna study in a process of
# its own). Two trials at once everywhere. Writes bench/multifidelity/RESULTS.md and curves.csv
# (about 25-40 minutes on two shared cores with 2 repeats).
#
# usage: bench/multifidelity/run.sh [BUILD_DIR] [options]
#   BUILD_DIR (default: build): holds bin/sextant and bin/sextant-worker
#             (ninja -C BUILD_DIR sextant sextant-worker)
# options (passed to mf_bench.py):
#   --quick             self-check, about 2-4 minutes: 2,000 training images, max 9 epochs, a few
#                       trials per method; checks the epoch accounting (fidelity_consumed equals
#                       the epochs train.py logged, resumes from checkpoints, no restarts from
#                       scratch, Optuna pruned trials were killed) and exits 1 on a problem;
#                       writes WORK/RESULTS.md, not bench/multifidelity/RESULTS.md
#   --methods LIST      random,asha,hyperband,bohb,optuna-sh,optuna-hb,optuna5-sh,optuna5-hb
#                       (and asha-stop, asha-tpe); optuna5-* = Optuna 5
#   --optuna5 DIR       Optuna 5's source folder, the one holding optuna/ (default
#                       $SEXTANT_OPTUNA5, else /work/shared/peers/optuna5); the run stops with a
#                       clear message when it is absent and an optuna5-* method is asked
#   --repeats N (2)     --seed S (1)
#   --trials LIST       per-method trial counts, e.g. random=20,asha=60,hyperband=26
#   --train-subset N (10000)   --max-epochs E (27)
#   --work DIR          scratch folder (default: a new /tmp/sextant-multifidelity.XXXXXX)
#   --out FILE          report (- for stdout)    --curves FILE    --keep (keep checkpoints)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PY=/usr/bin/python3   # Debian's python with python3-numpy and python3-optuna 3.1

if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 0
fi
BUILD="$ROOT/build"
if [[ $# -ge 1 && "$1" != -* ]]; then
  BUILD=$1
  shift
fi

missing=()
[[ -x "$PY" ]] || { echo "run.sh: $PY not found (apt-get install python3)" >&2; exit 2; }
"$PY" -c 'import numpy' 2>/dev/null || missing+=(python3-numpy)
"$PY" -c 'import optuna' 2>/dev/null || missing+=(python3-optuna)
[[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]] ||
  missing+=(dataset-fashion-mnist)
if (( ${#missing[@]} )); then
  echo "run.sh: missing ${missing[*]} (apt-get install ${missing[*]})" >&2
  exit 2
fi

cmdline=()
skip=0
for a in "$@"; do
  if (( skip )); then skip=0; continue; fi
  case "$a" in
    --work|--out|--curves) skip=1 ;;
    --work=*|--out=*|--curves=*|--keep) ;;
    *) cmdline+=("$a") ;;
  esac
done

export OPENBLAS_NUM_THREADS=1
exec "$PY" "$HERE/mf_bench.py" "$BUILD" "--cmdline=${cmdline[*]:-}" "$@"
