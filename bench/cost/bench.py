#!/usr/bin/python3
"""Cost benchmark: a 500-trial ASHA search on 32 GPUs under `sextant simulate`, with three
placement policies (all on-demand, spot-first, mixed) at spot interruption rates of 5% and 20%
per instance-day and notices of 120 s and 30 s. Prints a Markdown table and writes raw output.

usage: bench.py BIN_DIR OUT_DIR
"""
import os
import re
import subprocess
import sys
import time

BIN, OUT = sys.argv[1], sys.argv[2]
os.makedirs(OUT, exist_ok=True)

CATALOG = """regions: [us-east-1]
instances:
  gpu.1x: {{gpus: 1, gpu_memory_gb: 80, cpus: 16}}
billing: {{increment: 1s, minimum: 60s}}
offers:
  - {{region: us-east-1, instance: gpu.1x, market: on_demand, price_per_hour: 2.40}}
  - {{region: us-east-1, instance: gpu.1x, market: reserved, price_per_hour: 1.56}}
  - {{region: us-east-1, instance: gpu.1x, market: spot, price_per_hour: 0.72,
     interruption: {{rate_per_day: {rate}, notice: {notice}s, notice_probability: 0.95}}}}
"""

EXPERIMENT = """name: cost-bench
objective: {{metric: loss, goal: minimize}}
parameters:
  x0: {{type: float, min: -5, max: 10}}
  x1: {{type: float, min: 0, max: 15}}
search:
  sampler: random
  scheduler: asha
  fidelity: {{name: epoch, min: 1, max: 27, reduction_factor: 3}}
  seed: 11
  max_trials: 500
  max_concurrent: 32
trial: {{command: [train]}}
resources:
  provider: simulated
  catalog: {catalog}
  placement: {{policy: {policy}}}
  pools:
{pools}
simulate: {{seconds_per_unit: 10m, attempt_overhead: 30s, checkpoint_every: 1, checkpoint_time: 45s, boot_time: 90s, seed: {seed}}}
"""

OD = "    - {name: od, region: us-east-1, instance: gpu.1x, market: on_demand, max_instances: 32}"
SPOT = "    - {name: spot, region: us-east-1, instance: gpu.1x, market: spot, max_instances: 32}"
POLICIES = {
    "all on-demand": ("on_demand", OD),
    "spot-first": ("spot_first", SPOT + "\n" + OD),
    "mixed": ("mixed", SPOT + "\n" + OD),
}
SEEDS = [1, 2, 3]


def simulate(policy, rate, notice, seed):
    tag = f"{policy[0]}-{rate}-{notice}-{seed}"
    cat = os.path.join(OUT, f"catalog-{rate}-{notice}.yaml")
    with open(cat, "w") as f:
        f.write(CATALOG.format(rate=rate, notice=notice))
    exp = os.path.join(OUT, f"exp-{tag}.yaml")
    with open(exp, "w") as f:
        f.write(EXPERIMENT.format(catalog=os.path.abspath(cat), policy=policy[0], pools=policy[1],
                                  seed=seed))
    run_dir = os.path.join(OUT, f"run-{tag}")
    subprocess.run(["rm", "-rf", run_dir], check=True)
    t = time.monotonic()
    p = subprocess.run([os.path.join(BIN, "sextant"), "simulate", exp, "--run-dir", run_dir],
                       capture_output=True, text=True)
    real = time.monotonic() - t
    with open(os.path.join(OUT, "raw.txt"), "a") as f:
        f.write(f"### {tag}\n{p.stdout}{p.stderr}\n")
    if p.returncode != 0:
        sys.exit(f"simulate failed for {tag}: {p.stderr}")
    cost = float(re.search(r"cost:\s+([\d.]+)", p.stdout).group(1))
    wall = re.search(r"wall time:\s+(\S+)", p.stdout).group(1).split(":")
    wall_s = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall)))
    pre = int(re.search(r"preemptions: (\d+)", p.stdout).group(1))
    lost = float(re.search(r"([\d.]+) instance-seconds of work lost", p.stdout).group(1))
    best = float(re.search(r"best value:\s+loss=(\S+)", p.stdout).group(1))
    ev = re.search(r"(\d+) events in ([\d.]+) s \(([\d.]+) us per event\)", p.stdout)
    return dict(cost=cost, wall=wall_s, pre=pre, lost=lost, best=best, us_per_event=float(ev.group(3)),
                real=real)


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


open(os.path.join(OUT, "raw.txt"), "w").close()
print("| rate/day | notice | policy | cost USD | vs on-demand | wall h | vs on-demand | best loss | preemptions | GPU-h lost |")
print("|---|---|---|---|---|---|---|---|---|---|")
for rate in (0.05, 0.20):
    for notice in (120, 30):
        rows = {}
        for name, policy in POLICIES.items():
            runs = [simulate(policy, rate, notice, seed) for seed in SEEDS]
            rows[name] = {k: median([r[k] for r in runs]) for k in runs[0]}
            rows[name]["bests"] = [r["best"] for r in runs]
        base = rows["all on-demand"]
        for name, r in rows.items():
            print(f"| {rate:.0%} | {notice} s | {name} | {r['cost']:.2f} | {r['cost'] / base['cost'] - 1:+.1%} "
                  f"| {r['wall'] / 3600:.2f} | {r['wall'] / base['wall'] - 1:+.1%} | {r['best']:.4f} "
                  f"| {r['pre']:.0f} | {r['lost'] / 3600:.2f} |")
        sys.stdout.flush()
