#!/usr/bin/env bash
# Side-by-side round time of two builds of secagg_round_bench (for example the commit before a
# change and the change), interleaved in one run so that both see the same machine: ALTS
# alternations, each one `--n N --d D --reps 3` of each binary. Prints the median wall_s and
# cpu_s of each path for each binary, and the ratio new / old.
#   bench/secagg/ab.sh OLD_BENCH NEW_BENCH [ALTS] [N] [D]     (defaults 4, 100, 1e6)
set -euo pipefail
old=$1 new=$2 alts=${3:-4} n=${4:-100} d=${5:-1e6}
raw=$(mktemp)
echo "load_before $(cut -d' ' -f1-3 /proc/loadavg)"
for ((i = 0; i < alts; i++)); do
  "$old" --n "$n" --d "$d" --reps 3 | sed 's/^/which=old /' >> "$raw"
  "$new" --n "$n" --d "$d" --reps 3 | sed 's/^/which=new /' >> "$raw"
done
echo "load_after $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$raw" <<'PY'
import statistics, sys
rows = []
for line in open(sys.argv[1]):
    kv = dict(t.split("=", 1) for t in line.split() if "=" in t)
    if "path" in kv: rows.append(kv)
print("| path | metric | old (median) | new (median) | new / old | samples each |")
print("|---|---|---|---|---|---|")
for path in ("plain", "secure"):
    for metric in ("wall_s", "cpu_s"):
        vals = {w: [float(r[metric]) for r in rows if r["path"] == path and r["which"] == w]
                for w in ("old", "new")}
        o, n = statistics.median(vals["old"]), statistics.median(vals["new"])
        print(f"| {path} | {metric} | {o:.3f} | {n:.3f} | {n / o:.3f} | {len(vals['new'])} |")
PY
rm -f "$raw"
