#!/usr/bin/env bash
# Multi-objective benchmark, Sextant vs Optuna side by side in one invocation: median (and IQR)
# hypervolume after 50 and 100 trials over 10 seeds on ZDT1 (6-D), ZDT2 (6-D), DTLZ2 with 3
# objectives (6-D) and the constrained OSY (6-D, 6 constraints), for Sextant's nsga2, tpe,
# bayesian and random samplers, Optuna 3.1's NSGAIISampler, TPESampler (MOTPE) and
# RandomSampler, and Optuna 5's NSGAIISampler, TPESampler and GPSampler (each Optuna in a
# process of its own). Writes bench/multiobjective/RESULTS.md and raw.csv.
#
# usage: bench/multiobjective/run.sh BUILD_DIR [options]
#   BUILD_DIR: the CMake build directory, holding bin/sextant (ninja -C BUILD_DIR sextant sextant-worker)
# options (all passed to mo_bench.py):
#   --quick                    2 seeds x 50 trials (budgets 25,50)
#   --seeds N (10)  --trials T (100)  --budgets LIST (50,100)
#   --problems LIST            (zdt1,zdt2,dtlz2,osy; also bnh)
#   --sextant-samplers LIST    (nsga2,tpe,bayesian,random)
#   --optuna-samplers LIST     (nsga2,tpe,random,o5-nsga2,o5-tpe,o5-gp; o5-* = Optuna 5,
#                              also o5-random)
#   --optuna5 DIR              Optuna 5's source folder, the one holding optuna/ (default
#                              $SEXTANT_OPTUNA5, else /work/shared/peers/optuna5); the run
#                              stops with a clear message when it is absent and o5-* is asked
#   --max-concurrent N (1)     Sextant's search.max_concurrent
#   --jobs N (2)               searches run at once
#   --out FILE (RESULTS.md; - for stdout)  --csv FILE (raw.csv)
#   --work DIR                 scratch; searches recorded in DIR/runs.jsonl are not run again,
#                              so an interrupted run can be continued
#   --keep                     keep every Sextant run directory
set -euo pipefail

if [[ $# -lt 1 || "$1" == -* ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
BUILD=$1
shift
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=/usr/bin/python3   # Debian's python with python3-optuna 3.1, not the pyenv one on PATH

args=()
cmdline=()
skip=0
for a in "$@"; do
  if [[ "$a" == --quick ]]; then
    args+=(--seeds 2 --trials 50 --budgets 25,50)
  else
    args+=("$a")
  fi
  if (( skip )); then skip=0; continue; fi
  case "$a" in
    --work|--out|--csv) skip=1 ;;
    --work=*|--out=*|--csv=*|--keep) ;;
    *) cmdline+=("$a") ;;
  esac
done

if ! "$PY" -c 'import optuna' 2>/dev/null; then
  echo "run.sh: $PY lacks python3-optuna (apt-get install python3-optuna)" >&2
  exit 2
fi
"$PY" "$HERE/hypervolume.py" >/dev/null

exec "$PY" "$HERE/mo_bench.py" "$BUILD" --load-before "$(cut -d' ' -f1-3 /proc/loadavg)" \
  "--cmdline=${cmdline[*]:-}" "${args[@]}"
