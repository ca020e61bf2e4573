#!/usr/bin/env bash
# Side-by-side dispatch throughput of two builds of `sextant run` (for example a commit before a
# change and the change), interleaved so that both see the same machine: ALTS alternations, each
# one run of TRIALS trivial trials (/bin/sh -c 'echo loss=1'), two at a time with 2 local
# workers, as bench/dispatch/run.sh runs Sextant. Prints each run's trials/s and orchestrator
# CPU per trial, the medians of each build, and the ratio new / old.
#   bench/dispatch/ab.sh OLD_BIN_DIR NEW_BIN_DIR [ALTS] [TRIALS]     (defaults 4, 2000)
set -euo pipefail
old=$1 new=$2 alts=${3:-4} trials=${4:-2000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/experiment.yaml" <<YAML
name: dispatch-ab
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search: {sampler: random, seed: 1, max_trials: $trials, max_concurrent: 2}
trial:
  command: [/bin/sh, -c, "echo loss=1"]
YAML
echo "load_before $(cut -d' ' -f1-3 /proc/loadavg)"
for ((i = 0; i < alts; i++)); do
  for which in old new; do
    bin=$old; [[ $which == new ]] && bin=$new
    start=$(date +%s.%N)
    "$bin/sextant" run "$work/experiment.yaml" --run-dir "$work/$which-$i" --workers 2 \
      > "$work/$which-$i.out" 2>&1
    end=$(date +%s.%N)
    echo "$which $i $start $end" >> "$work/times"
  done
done
echo "load_after $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$work" "$trials" <<'PY'
import sqlite3, statistics, sys
work, n = sys.argv[1], int(sys.argv[2])
rate, cpu = {"old": [], "new": []}, {"old": [], "new": []}
for line in open(f"{work}/times"):
    which, i, start, end = line.split()
    db = sqlite3.connect(f"file:{work}/{which}-{i}/state.db?mode=ro", uri=True)
    done = db.execute("SELECT COUNT(*) FROM trials WHERE state = 'COMPLETED'").fetchone()[0]
    if done != n:
        sys.exit(f"{which} run {i}: {done}/{n} trials COMPLETED")
    row = db.execute("SELECT value FROM meta WHERE key = 'orchestrator_cpu_seconds'").fetchone()
    rate[which].append(n / (float(end) - float(start)))
    if row:
        v = row[0]
        cpu[which].append(1000 * float(v.decode() if isinstance(v, bytes) else v) / n)
print("| build | trials/s per run | median trials/s | median orchestrator CPU ms / trial |")
print("|---|---|---|---|")
for w in ("old", "new"):
    c = f"{statistics.median(cpu[w]):.3f}" if cpu[w] else "-"
    print(f"| {w} | {', '.join(f'{r:.1f}' for r in rate[w])} | {statistics.median(rate[w]):.1f} | {c} |")
print(f"\nnew / old trials/s: {statistics.median(rate['new']) / statistics.median(rate['old']):.3f}")
if cpu["old"] and cpu["new"]:
    print(f"new / old orchestrator CPU per trial: {statistics.median(cpu['new']) / statistics.median(cpu['old']):.3f}")
PY
