#!/usr/bin/python3
"""Simulate scale benchmark: `sextant simulate` with the random sampler and ASHA (epochs 1..27,
eta 3), spot-first placement over a spot pool (60% of the instances) and an on-demand pool
(40%), max_concurrent = the instance count, no budget. Writes the catalog and one experiment
per cell, runs each cell REPS times and prints a Markdown table of medians.

usage: bench.py BIN_DIR OUT_DIR [TRIALSxINSTANCES[b] ...]   (default: the matrix below; a
       trailing b adds budget.max_cost = 1,000,000 USD, which never runs out but makes the
       budget guard price the fleet at every launch)
env:   REPS (default 3); COMMIT names the source of BIN_DIR's binary in the header (default:
       `git describe --always --dirty` of this checkout, right only when BIN_DIR was built from it)
"""
import os
import re
import statistics
import subprocess
import sys
import time

BIN, OUT = sys.argv[1], sys.argv[2]


def parse_cell(c):
    budget = c.endswith("b")
    trials, instances = (int(x) for x in c.rstrip("b").split("x"))
    return trials, instances, budget


CELLS = [parse_cell(c) for c in sys.argv[3:]] or [
    (1000, 100, False), (10000, 100, False), (10000, 1000, False), (10000, 1000, True),
    (100000, 1000, False), (100000, 10000, False), (100000, 10000, True)]
REPS = int(os.environ.get("REPS", "3"))
os.makedirs(OUT, exist_ok=True)

CATALOG = """# Bench catalog: one instance type, spot in one region, on-demand in another.
regions: [us-east-1, eu-west-1]
instances:
  gpu.1x: {gpus: 1, gpu_memory_gb: 80, cpus: 16}
billing: {increment: 1s, minimum: 60s}
offers:
  - {region: us-east-1, instance: gpu.1x, market: spot, price_per_hour: 0.72,
     interruption: {rate_per_day: 1.0, notice: 120s, notice_probability: 0.95}}
  - {region: eu-west-1, instance: gpu.1x, market: on_demand, price_per_hour: 2.64}
"""

EXPERIMENT = """name: simbench-{trials}-{instances}
objective: {{metric: loss}}
parameters:
  x0: {{type: float, min: -5, max: 10}}
  x1: {{type: float, min: 0, max: 15}}
search:
  sampler: random
  scheduler: asha
  fidelity: {{name: epoch, min: 1, max: 27, reduction_factor: 3}}
  seed: 1
  max_trials: {trials}
  max_concurrent: {instances}
trial: {{command: [train]}}
resources:
  provider: simulated
  catalog: {catalog}
  placement: {{policy: spot_first}}
  pools:
    - {{name: spot, region: us-east-1, instance: gpu.1x, market: spot, max_instances: {spot}}}
    - {{name: od, region: eu-west-1, instance: gpu.1x, market: on_demand, max_instances: {od}}}
{budget}"""

LINE = re.compile(r"simulator:\s+(\d+) events in ([0-9.]+) s")


def write_files(trials, instances, budget):
    catalog = os.path.abspath(os.path.join(OUT, "catalog.yaml"))
    with open(catalog, "w") as f:
        f.write(CATALOG)
    spot = instances * 6 // 10
    path = os.path.join(OUT, f"exp-{trials}-{instances}{'b' if budget else ''}.yaml")
    with open(path, "w") as f:
        f.write(EXPERIMENT.format(trials=trials, instances=instances, catalog=catalog,
                                  spot=spot, od=instances - spot,
                                  budget="budget: {max_cost: 1000000}\n" if budget else ""))
    return path


def run_once(path, run_dir):
    subprocess.run(["rm", "-rf", run_dir], check=True)
    load = open("/proc/loadavg").read().split()[0]
    t0 = time.monotonic()
    r0 = os.times()
    p = subprocess.run([os.path.join(BIN, "sextant"), "simulate", path, "--run-dir", run_dir],
                       capture_output=True, text=True)
    wall = time.monotonic() - t0
    r1 = os.times()
    cpu = (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)
    if p.returncode != 0:
        sys.exit(f"sextant simulate failed ({p.returncode}): {p.stdout}{p.stderr}")
    m = LINE.search(p.stdout)
    return {"wall": wall, "cpu": cpu, "events": int(m.group(1)), "loop": float(m.group(2)),
            "load": float(load), "out": p.stdout}


def main():
    commit = os.environ.get("COMMIT") or subprocess.run(
        ["git", "-C", os.path.dirname(os.path.abspath(__file__)), "describe", "--always", "--dirty"],
        capture_output=True, text=True).stdout.strip()
    raw = open(os.path.join(OUT, "raw.txt"), "w")
    print(f"commit {commit}, {os.cpu_count()} CPUs, {REPS} runs per cell (medians)\n")
    print("| trials | instances | max_cost | wall s | CPU s | loop s | events | events/s (loop) | CPU us/event | load |")
    print("|---:|---:|:---:|---:|---:|---:|---:|---:|---:|---:|")
    for trials, instances, budget in CELLS:
        path = write_files(trials, instances, budget)
        runs = []
        for rep in range(REPS):
            r = run_once(path, os.path.join(OUT, f"run-{trials}-{instances}"))
            raw.write(f"== {trials} trials x {instances} instances{' with max_cost' if budget else ''}, run {rep + 1}: wall {r['wall']:.3f} s, "
                      f"cpu {r['cpu']:.3f} s, load {r['load']}\n{r['out']}\n")
            raw.flush()
            runs.append(r)
        med = {k: statistics.median(r[k] for r in runs) for k in ("wall", "cpu", "loop", "events", "load")}
        print(f"| {trials:,} | {instances:,} | {'yes' if budget else 'no'} | {med['wall']:.2f} | {med['cpu']:.2f} | {med['loop']:.2f} | "
              f"{int(med['events'])} | {med['events'] / med['loop']:,.0f} | "
              f"{1e6 * med['cpu'] / med['events']:.0f} | {med['load']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
