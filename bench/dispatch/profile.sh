#!/usr/bin/env bash
# Where does Sextant's per-trial dispatch time go? Companion to run.sh; findings in PROFILE.md.
#
# usage: bench/dispatch/profile.sh BUILD_BIN_DIR
#   env: TRIALS (1000), ROUNDS (3), CALLGRIND_TRIALS (300; 0 skips valgrind), KEEP=1
#
# 1. Interleaved runs of the benchmark experiment: as is, and with fsync/fdatasync turned into
#    no-ops by an LD_PRELOAD shim (what the store's synchronous=FULL commit costs per trial).
#    The workers' own CPU is sampled from /proc every 20 ms (the last sample before they exit).
# 2. A per-trial timeline from the run's own store: each attempt's lease-to-completion cycle
#    (orchestrator clock) against the worker-measured spawn-to-metric time.
# 3. valgrind --tool=callgrind on the orchestrator alone (workers untraced), self cost grouped
#    by shared object.
set -euo pipefail
[[ $# -eq 1 && -x "$1/sextant" ]] || { echo "usage: $0 BUILD_BIN_DIR" >&2; exit 2; }
BIN=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TRIALS=${TRIALS:-1000}
ROUNDS=${ROUNDS:-3}
CG_TRIALS=${CALLGRIND_TRIALS:-300}
PY=/usr/bin/python3
WORK=$(mktemp -d /tmp/sextant-dispatch-profile.XXXXXX)
if [[ "${KEEP:-0}" != 1 ]]; then trap 'rm -rf "$WORK"' EXIT; fi
echo "scratch: $WORK" >&2

experiment() {  # trials file
  cat >"$2" <<EOF
name: dispatch-profile
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search: {sampler: random, seed: 1, max_trials: $1, max_concurrent: 2}
trial:
  command: [/bin/sh, -c, "echo loss=1"]
EOF
}
experiment "$TRIALS" "$WORK/exp.yaml"
experiment "$CG_TRIALS" "$WORK/exp-cg.yaml"
printf 'int fsync(int f){(void)f;return 0;}\nint fdatasync(int f){(void)f;return 0;}\n' >"$WORK/nofsync.c"
cc -O2 -shared -fPIC -o "$WORK/nofsync.so" "$WORK/nofsync.c"

# Samples utime+stime of every sextant-worker whose parent is $1 until $1 exits.
sample_workers() {
  local parent=$1 out=$2
  declare -A last
  while kill -0 "$parent" 2>/dev/null; do
    for p in $(pgrep -P "$parent" -x sextant-worker || true); do
      local s
      s=$(cut -d')' -f2 "/proc/$p/stat" 2>/dev/null | awk '{print $12 + $13}') || continue
      [[ -n "$s" ]] && last[$p]=$s
    done
    sleep 0.02
  done
  local sum=0
  for p in "${!last[@]}"; do sum=$((sum + last[$p])); done
  echo "$sum" >"$out"
}

one_run() {  # name round [env...]
  local name=$1 r=$2 d="$WORK/$1-$2"
  shift 2
  mkdir -p "$d"
  env "$@" "$PY" "$HERE/measure.py" "$d/m.json" --stdout "$d/out" -- \
    "$BIN/sextant" run "$WORK/exp.yaml" --run-dir "$d/run" --workers 2 &
  local mpid=$!
  local spid=""
  for _ in $(seq 100); do
    spid=$(pgrep -P "$mpid" -x sextant || true)
    [[ -n "$spid" ]] && break
    sleep 0.01
  done
  [[ -n "$spid" ]] && sample_workers "$spid" "$d/worker_ticks"
  wait "$mpid"
}

for ((r = 1; r <= ROUNDS; r++)); do
  echo "round $r/$ROUNDS" >&2
  if ((r % 2)); then
    one_run base "$r"; one_run nofsync "$r" LD_PRELOAD="$WORK/nofsync.so"
  else
    one_run nofsync "$r" LD_PRELOAD="$WORK/nofsync.so"; one_run base "$r"
  fi
done

"$PY" - "$WORK" "$ROUNDS" "$TRIALS" "$(getconf CLK_TCK)" <<'EOF'
import json, os, sqlite3, statistics as st, sys
work, rounds, n, tck = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
print(f"## Variants ({n} trials, 2 workers, median of {rounds} interleaved rounds)\n")
print("| variant | trials/s | orchestrator CPU ms/trial | workers' own CPU ms/trial | workers+trials CPU ms/trial |")
print("|---|---|---|---|---|")
for name, label in (("base", "as built (synchronous=FULL)"), ("nofsync", "fsync/fdatasync no-op (LD_PRELOAD)")):
    rate, oc, wc, cc = [], [], [], []
    for r in range(1, rounds + 1):
        d = f"{work}/{name}-{r}"
        m = json.load(open(f"{d}/m.json"))
        p = m["procs"][0]
        rate.append(n / p["wall_s"]); oc.append(p["own_cpu_s"] / n * 1e3)
        cc.append(p["children_cpu_s"] / n * 1e3)
        try:
            wc.append(int(open(f"{d}/worker_ticks").read()) / tck / n * 1e3)
        except (OSError, ValueError):
            pass
    print(f"| {label} | {st.median(rate):.1f} ({', '.join(f'{x:.0f}' for x in rate)}) | {st.median(oc):.2f} "
          f"| {st.median(wc) if wc else float('nan'):.2f} | {st.median(cc):.2f} |")

print("\n## Per-trial timeline from the store (base runs; ms, median / p90)\n")
cyc, el, rest = [], [], []
for r in range(1, rounds + 1):
    c = sqlite3.connect(f"{work}/base-{r}/run/state.db")
    for s, f, e in c.execute("SELECT a.started_at, a.finished_at, m.elapsed FROM attempts a "
                             "JOIN measurements m ON m.trial_id = a.trial_id AND m.attempt = a.attempt"):
        cyc.append((f - s) * 1e3); el.append(e * 1e3); rest.append((f - s - e) * 1e3)
q = lambda xs: f"{st.median(xs):.2f} / {sorted(xs)[int(0.9 * len(xs))]:.2f}"
print("| segment | ms |\n|---|---|")
print(f"| cycle: lease granted -> completion recorded (one worker slot) | {q(cyc)} |")
print(f"| of which spawn -> `loss=1` read by the worker | {q(el)} |")
print(f"| of which the rest (commit+fsync, RPC both ways, worker setup, reap) | {q(rest)} |")
EOF

if ((CG_TRIALS > 0)) && command -v valgrind >/dev/null; then
  # Two runs, CG_TRIALS/4 and CG_TRIALS trials; their difference is the per-trial cost with
  # start-up (dynamic linking, YAML, schema) cancelled out.
  LO=$((CG_TRIALS / 4))
  for t in "$LO" "$CG_TRIALS"; do
    echo "callgrind ($t trials)..." >&2
    experiment "$t" "$WORK/exp-cg$t.yaml"
    valgrind --tool=callgrind --callgrind-out-file="$WORK/cg$t.out" \
      "$BIN/sextant" run "$WORK/exp-cg$t.yaml" --run-dir "$WORK/cg-run$t" --workers 2 \
      >"$WORK/cg$t.stdout" 2>"$WORK/cg$t.stderr"
    callgrind_annotate --threshold=100 "$WORK/cg$t.out" >"$WORK/cg$t.txt" 2>/dev/null
  done
  echo -e "\n## Orchestrator instructions per trial (callgrind, ($CG_TRIALS - $LO trials) difference, self cost)\n"
  "$PY" - "$WORK/cg$LO.txt" "$WORK/cg$CG_TRIALS.txt" "$((CG_TRIALS - LO))" <<'EOF2'
import collections, re, sys
def parse(path):
    funcs = collections.Counter()
    for line in open(path):
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(\S.*?)\s*$", line)
        if m and "PROGRAM TOTALS" not in line and "file:function" not in line:
            funcs[m.group(2)] += int(m.group(1).replace(",", ""))
    return funcs
lo, hi, n = parse(sys.argv[1]), parse(sys.argv[2]), int(sys.argv[3])
diff = {k: hi[k] - lo.get(k, 0) for k in hi}
def obj(k):
    m = re.search(r"\[(.*)\]$", k)
    return m.group(1).split("/")[-1] if m else "(unattributed)"
by = collections.Counter()
for k, v in diff.items():
    by[obj(k)] += v
total = sum(by.values())
print("| object | share | Ir per trial |\n|---|---|---|")
for o, v in by.most_common(10):
    print(f"| {o} | {v / total * 100:.1f}% | {v / n:,.0f} |")
print(f"| (all) | 100% | {total / n:,.0f} |\n\nTop functions (self Ir per trial):\n")
for k, v in sorted(diff.items(), key=lambda kv: -kv[1])[:20]:
    print(f"  {v / n:>10,.0f}  {k[:150]}")
EOF2
fi
