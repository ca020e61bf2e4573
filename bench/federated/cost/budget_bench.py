#!/usr/bin/env python3
"""How far a federated run's dollar cap can be passed: the round-cost projection's error.

Before each round the run projects what the round will add (every live instance kept as long as
the longest of the last three rounds, plus the most transfer of those rounds) and stops at the
round boundary when the dollars spent plus that projection would pass budget.max_cost. The cap
can then be passed by at most what the last round cost beyond its projection, plus the
wind-down after it (instances billed until their processes exit).

Setup: 2 regions x 4 clients, non-IID Fashion-MNIST, the built-in MLP, 20 synchronous rounds,
plaintext, every client 8x its training time (federation.stragglers: it sleeps the rest), so
that a round lasts about a second, as against a participant's wind-down of under one, without
taking the machine's CPU; a catalog billed per second with a 1 s minimum (so that dollars follow seconds, not
minimums) at $1 per instance-second, spot at $0.3 taken back about every 4 s per instance
(with a 1 s notice), and $50/GB between the regions so that transfer is a visible part of a
round. max_cost is set at the uncapped twin's bill after round 1 (start-up included) plus half
of what its rounds cost after that. For each run this records the
cap, the dollars spent, the overshoot, and every round's actual cost against its projection
(the round_cost events), and says whether the overshoot stayed within the largest projection
error plus the wind-down. Raw records go to budget_runs.jsonl beside this file.
"""
import argparse
import json
import os
import re
import sqlite3
import statistics
import subprocess
import time

CATALOG = """regions: [east, west]
instances: {box: {gpus: 0, gpu_memory_gb: 0, cpus: 2}}
billing: {increment: 1s, minimum: 1s}
offers:
  - {region: east, instance: box, market: on_demand, price_per_second: 1}
  - {region: west, instance: box, market: on_demand, price_per_second: 1}
  - {region: east, instance: box, market: spot, price_per_second: 0.3,
     interruption: {rate_per_day: 21600, notice: 1s, notice_probability: 1}}
  - {region: west, instance: box, market: spot, price_per_second: 0.3,
     interruption: {rate_per_day: 21600, notice: 1s, notice_probability: 1}}
transfer: {between_regions_per_gb: 50}
"""
EXPERIMENT = """name: bench-fl-budget-%(market)s
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "64"}}
federation:
  regions: [{name: east, clients: 4}, {name: west, clients: 4}]
  rounds: 20
  local_lr: 0.05
  stragglers:
    clients: [east/0, east/1, east/2, east/3, west/0, west/1, west/2, west/3]
    slowdown: 8
  min_clients: 6
  round_deadline: 10s
  partition: dirichlet
  dirichlet_alpha: 0.5
  examples_per_client: 1000
  validation_examples: 1000
  secure_aggregation: false
  seed: %(seed)d
resources:
  catalog: catalog.yaml
  pools:
    - {name: east-clients, region: east, instance: box, market: %(market)s, hosts: clients}
    - {name: east-agg, region: east, instance: box, hosts: aggregator}
    - {name: west-clients, region: west, instance: box, market: %(market)s, hosts: clients}
    - {name: west-agg, region: west, instance: box, hosts: aggregator}
%(budget)s"""


def run(build, d, market, seed, cap):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "catalog.yaml"), "w") as f:
        f.write(CATALOG)
    exp = os.path.join(d, "exp.yaml")
    budget = "budget: {max_cost: %g}\n" % cap if cap else ""
    with open(exp, "w") as f:
        f.write(EXPERIMENT % {"market": market, "seed": seed, "budget": budget})
    run_dir = os.path.join(d, "run")
    subprocess.run(["rm", "-rf", run_dir], check=True)
    p = subprocess.run([os.path.join(build, "bin", "sextant"), "run", exp, "--run-dir", run_dir],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("%s seed %d failed:\n%s%s" % (market, seed, p.stdout, p.stderr))
    db = sqlite3.connect(os.path.join(run_dir, "state.db"))
    state = db.execute("SELECT value FROM meta WHERE key = 'state'").fetchone()[0]
    if isinstance(state, bytes):
        state = state.decode()
    spent = db.execute("SELECT SUM(cost) FROM costs WHERE kind != 'trial'").fetchone()[0]
    errors, last_committed, after_round_1 = [], None, None
    for (msg,) in db.execute("SELECT message FROM events WHERE kind = 'round_cost' ORDER BY id"):
        m = re.search(r"round=(\d+) cost=([0-9.e+-]+) projected=(\S+) total=([0-9.e+-]+)", msg)
        last_committed = float(m.group(4))
        if m.group(1) == "1":
            after_round_1 = last_committed
        if m.group(3) != "-":
            errors.append(float(m.group(2)) - float(m.group(3)))
    rounds = db.execute("SELECT MAX(round) FROM rounds WHERE region = ''").fetchone()[0]
    return {"market": market, "seed": seed, "cap": cap, "state": state, "rounds": rounds,
            "spent": spent, "committed_at_last_round": last_committed,
            "after_round_1": after_round_1,
            "wind_down": spent - last_committed if last_committed is not None else None,
            "max_under_projection": max(errors) if errors else None,
            "median_abs_error": statistics.median(abs(e) for e in errors) if errors else None,
            "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--work", default="/tmp/sextant-bench-fl-budget")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "budget_runs.jsonl"))
    a = ap.parse_args()
    recs = []
    with open(a.out, "a") as out:
        for seed in range(1, a.seeds + 1):
            for market in ("on_demand", "spot"):
                d = os.path.join(a.work, "%s-%d" % (market, seed))
                full = run(a.build, d + "-uncapped", market, seed, None)
                # Start-up (every participant loading its data) is paid before the first round:
                # the cap leaves room for it and for 3/4 of the rounds after it.
                cap = round(full["after_round_1"] + 0.75 * (full["spent"] - full["after_round_1"]),
                            2)
                r = run(a.build, d, market, seed, cap)
                r["overshoot"] = r["spent"] - cap
                r["uncapped"] = full
                print(json.dumps(r), flush=True)
                out.write(json.dumps(r) + "\n")
                recs.append(r)
    print("\n| market | seed | uncapped $ | its rounds: median abs projection error $ |"
          " largest under-projection $ | its wind-down $ | cap $ | spent $ | overshoot $ |"
          " rounds | state |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in recs:
        f = r["uncapped"]
        print("| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %+.2f | %d | %s |" % (
            r["market"], r["seed"], f["spent"], f["median_abs_error"],
            f["max_under_projection"], f["wind_down"], r["cap"], r["spent"], r["overshoot"],
            r["rounds"] or 0, r["state"]))


if __name__ == "__main__":
    main()
