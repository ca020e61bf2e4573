#!/usr/bin/env bash
# CPU training throughput, Sextant's built-in trainer vs PyTorch side by side in one invocation:
# the Fashion-MNIST MLP 784-512-256-10 (ReLU), batch 128, Adam lr 1e-3, the same thread count on
# both sides, 50,000 training examples. Each run trains --epochs epochs and reports the last
# epoch's samples/s (training steps only: batch gather, forward, backward, optimiser step).
# Runs alternate between the two sides (and which goes first) so drifting machine load hits both
# alike; the medians and their ratio go to bench/trainer/RESULTS.md.
#
# usage: bench/trainer/run.sh BUILD_DIR [--runs N (5)] [--epochs E (2)] [--threads T (2)]
#                             [--out FILE (bench/trainer/RESULTS.md; - for stdout)]
#   BUILD_DIR holds bin/sextant-train (ninja -C BUILD_DIR sextant-train).
#   Needs python3-torch and dataset-fashion-mnist (scripts/install-deps --bench).
# Three settings are measured: at --threads, "as shipped" (no OMP_WAIT_POLICY in the environment:
# sextant-train sets passive itself, PyTorch keeps its default) and "both passive"
# (OMP_WAIT_POLICY=passive exported to both), so neither side's threading default decides the
# comparison alone; and at 1 thread, where no threads contend. PyTorch's BLAS (Debian's OpenBLAS)
# gets OPENBLAS_NUM_THREADS equal to the thread count. Text after the line "<!-- notes -->" in
# an existing RESULTS.md is kept.
set -euo pipefail

if [[ $# -lt 1 || "$1" == -* ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
BUILD=$1
shift
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=/usr/bin/python3   # Debian's python with python3-torch, not the pyenv one on PATH
RUNS=5
EPOCHS=2
THREADS=2
OUT=$HERE/RESULTS.md
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) RUNS=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
TRAINER=$BUILD/bin/sextant-train
[[ -x $TRAINER ]] || { echo "missing $TRAINER (ninja -C $BUILD sextant-train)" >&2; exit 2; }
$PY -c 'import torch' 2>/dev/null || { echo "python3-torch missing: scripts/install-deps --bench" >&2; exit 2; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
LOG=$WORK/samples.tsv   # setting, side, run, samples/s

last_rate() { grep -o 'samples_per_sec=[0-9.]*' | tail -1 | cut -d= -f2; }

sextant() {
  env "$@" "$TRAINER" --model mlp --dataset fashion-mnist --epochs "$EPOCHS" --batch-size 128 \
    --hidden 512,256 --optimizer adam --lr 0.001 --threads "$T" --val-subset 1000 | last_rate
}
pytorch() {
  env "$@" OPENBLAS_NUM_THREADS="$T" $PY "$HERE/torch_mlp.py" --epochs "$EPOCHS" --threads "$T" --batch-size 128 \
    --hidden 512,256 --lr 0.001 | last_rate
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for setting in shipped passive single; do
  T=$THREADS
  case $setting in
    shipped) envs=(-u OMP_WAIT_POLICY) ;;
    passive) envs=(OMP_WAIT_POLICY=passive) ;;
    single) envs=(-u OMP_WAIT_POLICY); T=1 ;;
  esac
  for ((i = 1; i <= RUNS; i++)); do
    if (( i % 2 )); then order=(sextant pytorch); else order=(pytorch sextant); fi
    for side in "${order[@]}"; do
      rate=$($side "${envs[@]}")
      printf '%s\t%s\t%d\t%s\n' "$setting" "$side" "$i" "$rate" >> "$LOG"
      echo "$setting run $i $side: $rate samples/s" >&2
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

$PY - "$LOG" "$OUT" "$RUNS" "$EPOCHS" "$THREADS" "$load_before" "$load_after" <<'PYEOF'
import statistics, subprocess, sys, platform, os
log, out, runs, epochs, threads, lb, la = sys.argv[1:8]
rows = [l.rstrip("\n").split("\t") for l in open(log)]
import torch
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
flags = next((l for l in open("/proc/cpuinfo") if l.startswith("flags")), "")
isa = "avx512" if " avx512f" in flags else ("avx2" if " avx2" in flags else "generic")
try:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
except Exception:
    commit = "?"
lines = ["# CPU training throughput: Sextant's built-in trainer vs PyTorch", "",
         f"Fashion-MNIST MLP 784-512-256-10 (ReLU), batch 128, Adam lr 1e-3, {threads} threads on both "
         f"sides, 50,000 training examples; samples/s of the last epoch of {epochs} (training steps only), "
         f"{runs} alternating runs per side and setting (the 1-thread rows: 1 thread on both sides). Produced by `bench/trainer/run.sh` at commit {commit}.", "",
         f"Machine: {os.cpu_count()} CPUs ({cpu}, GEMM variant picked at run time: {isa}); load average "
         f"{lb} before, {la} after (the machine is shared, so absolute figures are noisy; "
         f"the ratio compares runs interleaved in time). PyTorch {torch.__version__} (Debian python3-torch).", "",
         "| setting | Sextant median | PyTorch median | ratio Sextant/PyTorch | Sextant runs | PyTorch runs |",
         "|---|---:|---:|---:|---|---|"]
for setting, label in (("shipped", f"{threads} threads, as shipped (sextant-train sets OMP_WAIT_POLICY=passive; PyTorch default)"),
                       ("passive", f"{threads} threads, OMP_WAIT_POLICY=passive for both"),
                       ("single", "1 thread")):
    s = [float(r[3]) for r in rows if r[0] == setting and r[1] == "sextant" and r[3]]
    p = [float(r[3]) for r in rows if r[0] == setting and r[1] == "pytorch" and r[3]]
    if not s or not p:
        continue
    ms, mp = statistics.median(s), statistics.median(p)
    lines.append(f"| {label} | {ms:,.0f} | {mp:,.0f} | {ms / mp:.2f}x | "
                 f"{', '.join(f'{v:,.0f}' for v in s)} | {', '.join(f'{v:,.0f}' for v in p)} |")
lines += ["", "Reproduce: `ninja -C build sextant-train && bench/trainer/run.sh build` "
          "(needs `scripts/install-deps --bench`)."]
text = "\n".join(lines) + "\n"
if out != "-" and os.path.exists(out):
    old = open(out).read()
    if "<!-- notes -->" in old:
        text += "\n" + old[old.index("<!-- notes -->"):]
if out == "-":
    sys.stdout.write(text)
else:
    open(out, "w").write(text)
    sys.stdout.write(text)
PYEOF
