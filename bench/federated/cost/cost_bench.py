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
import signal
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


def forecast(sextant, exp, time_scale, pilot=None):
    """simulate's dollars for exp; timed by the pilot run's measured rounds when given."""
    cmd = [sextant, "simulate", exp, "--time-scale", str(time_scale)]
    if pilot:
        cmd += ["--calibrate", pilot]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return float(re.search(r"cost: +([0-9.]+) ", out).group(1))


def run_once(build, work, placement, seed, time_scale, pilot=None, limit=300):
    """One live run (stopped by SIGTERM, as a user would, past `limit` seconds) and its
    forecasts: by the simulate: block, and timed by the pilot run."""
    d = os.path.join(work, "%s-%d" % (placement, seed))
    os.makedirs(d, exist_ok=True)
    exp = os.path.join(d, "exp.yaml")
    with open(exp, "w") as f:
        f.write(EXPERIMENT % dict(PLACEMENTS[placement], placement=placement, seed=seed))
    run_dir = os.path.join(d, "run")
    subprocess.run(["rm", "-rf", run_dir], check=True)
    sextant = os.path.join(build, "bin", "sextant")
    start = time.time()
    p = subprocess.Popen([sextant, "run", exp, "--run-dir", run_dir, "--time-scale",
                          str(time_scale)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        stdout, stderr = p.communicate(timeout=limit)
        stopped = False
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        stdout, stderr = p.communicate()
        stopped = True
    wall = time.time() - start
    if p.returncode != 0 and not stopped:
        sys.exit("%s seed %d failed:\n%s%s" % (placement, seed, stdout, stderr))
    r = json.loads(subprocess.run([sextant, "results", run_dir, "--format", "json"],
                                  capture_output=True, text=True, check=True).stdout)
    rounds = r["rounds"]
    rec = {"placement": placement, "seed": seed, "wall_s": round(wall, 2),
           "rounds": len([x for x in rounds if x.get("accuracy") is not None]),
           "accuracy": rounds[-1]["accuracy"] if rounds else None,
           "compute": r["cost"]["compute"], "transfer": r["cost"]["transfer"],
           "total": r["cost"]["total"], "preemptions": r["preemptions"]["total"],
           "predicted": forecast(sextant, exp, time_scale), "state": r["state"]}
    if stopped:
        rec["stopped_after_s"] = limit
    if pilot:
        rec["predicted_calibrated"] = forecast(sextant, exp, time_scale, pilot)
    return rec, run_dir


def summarise(records):
    print("\n| placement | compute $ | transfer $ | total $ | accuracy | wall s | preemptions |"
          " forecast / live | within 10% | timed by the pilot: forecast / live | within 10% |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    med = {}
    for placement in PLACEMENTS:
        rs = [r for r in records if r["placement"] == placement]
        m = {k: statistics.median(r[k] for r in rs if r.get(k) is not None)
             for k in ("compute", "transfer", "total", "accuracy", "wall_s", "preemptions")}
        cells = []
        for key in ("predicted", "predicted_calibrated"):
            ratios = [r[key] / r["total"] for r in rs if key in r]
            cells.append("%.3f | %d of %d" % (
                statistics.median(ratios), sum(abs(x - 1) <= 0.1 for x in ratios), len(ratios))
                if ratios else "- | -")
        med[placement] = m
        print("| %s | %.4f | %.6f | %.4f | %.4f | %.1f | %g | %s | %s |" % (
            placement, m["compute"], m["transfer"], m["total"], m["accuracy"], m["wall_s"],
            m["preemptions"], cells[0], cells[1]))
    od = med["on_demand"]
    for placement in ("spot", "mixed"):
        m = med[placement]
        print("%s: %.1f%% cheaper than on-demand, accuracy %+.4f" % (
            placement, 100 * (1 - m["total"] / od["total"]), m["accuracy"] - od["accuracy"]))



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--work", default="/tmp/sextant-bench-fl-cost")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--time-scale", type=float, default=2e-5)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--limit", type=float, default=300,
                    help="seconds a live run may take before it is stopped (SIGTERM)")
    ap.add_argument("--pilot", action="store_true",
                    help="also forecast every run timed by an on-demand pilot run (seed 0)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "runs.jsonl"))
    ap.add_argument("--reforecast", metavar="JSONL",
                    help="no runs: forecast again the runs recorded in JSONL (their experiment "
                         "files and the pilot still in --work) with this build, and summarise")
    a = ap.parse_args()
    if a.reforecast:
        sextant = os.path.join(a.build, "bin", "sextant")
        pilot = os.path.join(a.work, "on_demand-0", "run")
        records = [json.loads(line) for line in open(a.reforecast)]
        for r in records:
            exp = os.path.join(a.work, "%s-%d" % (r["placement"], r["seed"]), "exp.yaml")
            r["predicted"] = forecast(sextant, exp, r["time_scale"])
            r["predicted_calibrated"] = forecast(sextant, exp, r["time_scale"], pilot)
            print(json.dumps(r), flush=True)
        summarise(records)
        return
    records = []
    pilot = None
    if a.pilot:
        # One on-demand run of seed 0 (no market to draw), whose measured start-up and rounds
        # time every calibrated forecast: what a user knows after one run of the experiment.
        rec, pilot = run_once(a.build, a.work, "on_demand", 0, a.time_scale, limit=a.limit)
        print("pilot: %s" % json.dumps(rec), flush=True)
    with open(a.out, "a") as out:
        for seed in range(a.first_seed, a.first_seed + a.runs):
            for placement in PLACEMENTS:
                rec, _ = run_once(a.build, a.work, placement, seed, a.time_scale, pilot, a.limit)
                rec["time_scale"] = a.time_scale
                rec["date"] = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
                print(json.dumps(rec), flush=True)
                out.write(json.dumps(rec) + "\n")
                records.append(rec)
    summarise(records)


if __name__ == "__main__":
    main()
