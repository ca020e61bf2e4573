#!/usr/bin/env bash
# HPO benchmark, Sextant vs Optuna (Debian's 3.1 and Optuna 5 from source) side by side in one
# invocation: the quality of each sampler (median simple regret after 1/4, 1/2 and all trials
# on Branin, Hartmann6, Rosenbrock-4D, shifted Ackley-5D, a mixed int/categorical problem, a
# noisy all-categorical one and a mixed categorical one with stepped ints and floats) and
# suggestion latency in 10-D at 50/100/200/500 observations. Writes bench/hpo/RESULTS.md.
#
# usage: bench/hpo/run.sh BUILD_DIR [options]
#   BUILD_DIR: the CMake build directory, holding bin/sextant, bin/sextant-worker,
#              bench/hpo_objective and bench/sampler_latency
#              (ninja -C BUILD_DIR sextant sextant-worker hpo_objective sampler_latency)
# options (all passed to hpo_bench.py):
#   --quick                    2 seeds x 30 trials, latency at N=50,200 with 5 repetitions
#   --seeds N (10)  --trials T (100)
#   --sextant-samplers LIST    (bayesian,tpe; e.g. random,sobol before the model samplers exist)
#   --optuna-samplers LIST     (tpe,tpe-mv,cmaes,qmc,random,o5-gp,o5-tpe; o5-*: Optuna 5)
#   --optuna-latency LIST      (tpe,tpe-mv,cmaes,o5-gp)
#   --optuna5 DIR              Optuna 5's source folder, for the o5-* samplers
#                              ($SEXTANT_OPTUNA5, else /work/shared/peers/optuna5); the run
#                              stops with a message when it is missing
#   --problems LIST            (all of hpo_objective --list: branin,hartmann6,rosenbrock,
#                              ackley,mixed,mixed6,cat6,ordinal)
#   --jobs N (2, at most 2)    searches run at once
#   --latency-n LIST (50,100,200,500)  --latency-dim D (10)  --latency-reps R (30)
#   --latency-max-seconds S (20)       --no-latency
#   --out FILE (bench/hpo/RESULTS.md; - for stdout)
#   --work DIR                 scratch; searches recorded in DIR/runs.jsonl are not run again,
#                              so an interrupted run can be continued
#   --keep                     keep every Sextant run directory
#   --estimate-only            print the runtime estimate and exit
# RESULTS.md comes from `--seeds 5 --trials 200 --problems branin,hartmann6,rosenbrock,ackley,
# mixed,cat6,ordinal` (budgets 50, 100, 200); it prints its estimate first and an ETA as it goes.
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
    args+=(--seeds 2 --trials 30 --latency-n 50,200 --latency-reps 5 --latency-max-seconds 5)
  else
    args+=("$a")
  fi
  # The command line shown in RESULTS.md, less where the files went.
  if (( skip )); then skip=0; continue; fi
  case "$a" in
    --work|--out) skip=1 ;;
    --work=*|--out=*|--keep) ;;
    *) cmdline+=("$a") ;;
  esac
done

missing=()
"$PY" -c 'import optuna' 2>/dev/null || missing+=(python3-optuna)
"$PY" -c 'import cmaes' 2>/dev/null || missing+=(python3-cmaes)
"$PY" -c 'import scipy.stats.qmc' 2>/dev/null || missing+=(python3-scipy)
if (( ${#missing[@]} )); then
  echo "run.sh: $PY lacks ${missing[*]} (apt-get install ${missing[*]})" >&2
  exit 2
fi

exec "$PY" "$HERE/hpo_bench.py" "$BUILD" --load-before "$(cut -d' ' -f1-3 /proc/loadavg)" \
  "--cmdline=${cmdline[*]:-}" "${args[@]}"
