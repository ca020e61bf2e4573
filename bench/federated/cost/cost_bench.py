#!/usr/bin/env python3
"""Dollars of a federated run by placement: on-demand, spot, and mixed (spot clients, an
on-demand aggregator), each billed by the built-in catalog.

2 regions (us-east-1, the global region, and eu-west-1) x 4 clients on non-IID Fashion-MNIST
(Dirichlet 0.5, 2,000 examples each), the built-in MLP, 20 synchronous rounds, secure
aggregation on (the default). Clients on gpu.1x, aggregators on cpu.small. Spot pools are
interrupted at the catalog's rates, compressed by --time-scale so that a run of seconds sees
what a run of days would (the market takes instances back; each is replaced in its place).
Every placement runs with the same seeds; runs alternate placements so that machine noise
falls on all alike. Figures: compute and transfer dollars (results' cost), the final global
validation accuracy, wall seconds, preemptions, and `sextant simulate`'s forecast of the same
experiment (same --time-scale; simulate: block below, set before any run) against them.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

EXPERIMENT = """name: bench-fl-cost-%(placement)s
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "64"}}
federation:
  regions: [{name: us-east-1, clients: 4}, {name: eu-west-1, clients: 4}]
  global_region: us-east-1
  rounds: 20
  local_lr: 0.05
  min_clients: 6
  round_deadline: 10s
  partition: dirichlet
  dirichlet_alpha: 0.5
  examples_per_client: 2000
  validation_examples: 2000
  seed: %(seed)d
simulate: {client_seconds: 0.2s, boot_time: 2s, link_mbps: 1000}
resources:
  pools:
    - {name: us-clients, region: us-east-1, instance: gpu.1x, market: %(clients)s, hosts: clients, max_instances: 4}
    - {name: us-agg, region: us-east-1, instance: cpu.small, market: %(agg)s, hosts: aggregator}
    - {name: eu-clients, region: eu-west-1, instance: gpu.1x, market: %(clients)s, hosts: clients, max_instances: 4}
    - {name: eu-agg, region: eu-west-1, instance: cpu.small, market: %(agg)s, hosts: aggregator}
"""
PLACEMENTS = {
    "on_demand": {"clients": "on_demand", "agg": "on_demand"},
    "spot": {"clients": "spot", "agg": "spot"},
    "mixed": {"clients": "spot", "agg": "on_demand"},
}


def run_once(build, work, placement, seed, time_scale):
    d = os.path.join(work, "%s-%d" % (placement, seed))
    os.makedirs(d, exist_ok=True)
    exp = os.path.join(d, "exp.yaml")
    with open(exp, "w") as f:
        f.write(EXPERIMENT % dict(PLACEMENTS[placement], placement=placement, seed=seed))
    run_dir = os.path.join(d, "run")
    subprocess.run(["rm", "-rf", run_dir], check=True)
    sextant = os.path.join(build, "bin", "sextant")
    start = time.time()
    p = subprocess.run([sextant, "run", exp, "--run-dir", run_dir, "--time-scale",
                        str(time_scale)], capture_output=True, text=True)
    wall = time.time() - start
    if p.returncode != 0:
        sys.exit("%s seed %d failed:\n%s%s" % (placement, seed, p.stdout, p.stderr))
    r = json.loads(subprocess.run([sextant, "results", run_dir, "--format", "json"],
                                  capture_output=True, text=True, check=True).stdout)
    forecast = subprocess.run([sextant, "simulate", exp, "--time-scale", str(time_scale)],
                              capture_output=True, text=True, check=True).stdout
    predicted = float(re.search(r"cost: +([0-9.]+) ", forecast).group(1))
    rounds = r["rounds"]
    return {"placement": placement, "seed": seed, "wall_s": round(wall, 2),
            "rounds": len(rounds), "accuracy": rounds[-1]["accuracy"],
            "compute": r["cost"]["compute"], "transfer": r["cost"]["transfer"],
            "total": r["cost"]["total"], "preemptions": r["preemptions"]["total"],
            "predicted": predicted}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--work", default="/tmp/sextant-bench-fl-cost")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--time-scale", type=float, default=2e-5)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "runs.jsonl"))
    a = ap.parse_args()
    records = []
    with open(a.out, "a") as out:
        for seed in range(1, a.runs + 1):
            for placement in PLACEMENTS:
                rec = run_once(a.build, a.work, placement, seed, a.time_scale)
                rec["time_scale"] = a.time_scale
                rec["date"] = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
                print(json.dumps(rec), flush=True)
                out.write(json.dumps(rec) + "\n")
                records.append(rec)
    print("\n| placement | compute $ | transfer $ | total $ | accuracy | wall s | preemptions |"
          " forecast $ | forecast / live |")
    print("|---|---|---|---|---|---|---|---|---|")
    med = {}
    for placement in PLACEMENTS:
        rs = [r for r in records if r["placement"] == placement]
        m = {k: statistics.median(r[k] for r in rs)
             for k in ("compute", "transfer", "total", "accuracy", "wall_s", "preemptions",
                       "predicted")}
        m["ratio"] = statistics.median(r["predicted"] / r["total"] for r in rs)
        med[placement] = m
        print("| %s | %.4f | %.6f | %.4f | %.4f | %.1f | %g | %.4f | %.3f |" % (
            placement, m["compute"], m["transfer"], m["total"], m["accuracy"], m["wall_s"],
            m["preemptions"], m["predicted"], m["ratio"]))
    od = med["on_demand"]
    for placement in ("spot", "mixed"):
        m = med[placement]
        print("%s: %.1f%% cheaper than on-demand, accuracy %+.4f" % (
            placement, 100 * (1 - m["total"] / od["total"]), m["accuracy"] - od["accuracy"]))


if __name__ == "__main__":
    main()
