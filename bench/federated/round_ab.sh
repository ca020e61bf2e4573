#!/usr/bin/env bash
# End-to-end round time of two builds of `sextant run` on one federated experiment, interleaved:
# examples/federated/fashion-mnist-fedavg.yaml (2 regions x 3 clients, the built-in MLP, 5
# rounds) with secure aggregation on, ALTS times each. A round's time is the gap between the
# global tier's commits of consecutive rounds (the `rounds` table's time column), so that start-up
# is left out; prints the median over all runs for each build, and the ratio new / old.
#   bench/federated/round_ab.sh OLD_BIN_DIR NEW_BIN_DIR [ALTS]     (default 3)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
old=$1 new=$2 alts=${3:-3}
work=$(mktemp -d)
sed 's/secure_aggregation: false/secure_aggregation: true/' \
  "$root/examples/federated/fashion-mnist-fedavg.yaml" > "$work/exp.yaml"
echo "load_before $(cut -d' ' -f1-3 /proc/loadavg)"
for ((i = 0; i < alts; i++)); do
  for which in old new; do
    bin=$old; [[ $which == new ]] && bin=$new
    "$bin/sextant" run "$work/exp.yaml" --run-dir "$work/$which-$i" > "$work/$which-$i.out" 2>&1
  done
done
echo "load_after $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$work" "$alts" <<'PY'
import sqlite3, statistics, sys
work, alts = sys.argv[1], int(sys.argv[2])
gaps, accuracy = {"old": [], "new": []}, {"old": [], "new": []}
for which in gaps:
    for i in range(alts):
        db = sqlite3.connect(f"{work}/{which}-{i}/state.db")
        rows = db.execute("SELECT round, time, accuracy FROM rounds WHERE region = '' ORDER BY round").fetchall()
        gaps[which] += [b[1] - a[1] for a, b in zip(rows, rows[1:])]
        accuracy[which].append(rows[-1][2])
o, n = statistics.median(gaps["old"]), statistics.median(gaps["new"])
print("| build | median round (s) | rounds | final accuracy per run |")
print("|---|---|---|---|")
for which, m in (("old", o), ("new", n)):
    print(f"| {which} | {m:.3f} | {len(gaps[which])} | {', '.join(f'{a:.4f}' for a in accuracy[which])} |")
print(f"\nnew / old: {n / o:.3f}")
PY
rm -rf "$work"
