#!/usr/bin/env bash
# Warm-start benchmark, Sextant vs Optuna side by side in one invocation: on Branin, Hartmann6
# and the 6-D mixed float/int/categorical problem of bench/hpo (mixed6), a new 20-trial run
# seeded by an earlier 100-trial run of the same problem with its optimum shifted by 0.1 of
# each range; median regret after 20 trials over 10 seeds, cold vs search.warm_start (bayesian, tpe), search.enqueue of the old
# best 10 (tpe), Optuna 3.1 TPE cold vs enqueue_trial of the same best 10, and Optuna 5 TPE and
# GP, each cold and with enqueue_trial of the same best 10 (each Optuna search in a process of
# its own, through bench/hpo/optuna_peer.py). Writes bench/warmstart/RESULTS.md and the raw
# records bench/warmstart/runs.jsonl.
#
# usage: bench/warmstart/run.sh BUILD_DIR [options]
#   BUILD_DIR: the CMake build directory, holding bin/sextant, bin/sextant-worker and
#              bench/hpo_objective (ninja -C BUILD_DIR sextant sextant-worker hpo_objective)
# options (all passed to warmstart_bench.py):
#   --quick                    2 seeds
#   --seeds N (10)  --trials T (20)  --old-trials T (100)  --shift F (0.1)
#   --problems LIST            (branin,hartmann6,mixed6)
#   --jobs N (2, at most 2)    searches run at once
#   --optuna5 DIR              Optuna 5's source folder, the one holding optuna/ (default
#                              $SEXTANT_OPTUNA5, else /work/shared/peers/optuna5); the run stops
#                              with a clear message when it is absent
#   --out FILE (bench/warmstart/RESULTS.md; - for stdout)  --raw FILE (bench/warmstart/runs.jsonl)
#   --work DIR  --keep         scratch directory, and keep every run directory in it
# The full run is 30 earlier runs and 330 new searches: about 6-10 minutes on 2 busy cores.
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
    args+=(--seeds 2)
  else
    args+=("$a")
  fi
  # The command line shown in RESULTS.md, less where the files went.
  if (( skip )); then skip=0; continue; fi
  case "$a" in
    --work|--out|--raw) skip=1 ;;
    --work=*|--out=*|--raw=*|--keep) ;;
    *) cmdline+=("$a") ;;
  esac
done

"$PY" -c 'import optuna' 2>/dev/null || {
  echo "run.sh: $PY lacks python3-optuna (apt-get install python3-optuna)" >&2
  exit 2
}

exec "$PY" "$HERE/warmstart_bench.py" "$BUILD" --load-before "$(cut -d' ' -f1-3 /proc/loadavg)" \
  "--cmdline=${cmdline[*]:-}" "${args[@]}"
