#!/usr/bin/env python3
"""Tuning federated learning: three ways of choosing a FedAvg configuration, compared by the
accuracy they reach and the dollars they spend.

Fashion-MNIST, Dirichlet alpha 0.3, 2 regions x 5 clients (500 examples each, 2,000 validation
images), the built-in MLP, at most ROUNDS rounds (default 12), secure aggregation off. Tuned:
local_lr, local_epochs, server_lr, server_optimizer, proximal_mu (and, with DP, clip_norm).
  (a) default: Sextant's FedAvg defaults, one run of ROUNDS rounds;
  (b) grid: every point of a 2-point grid over the space (32 configurations), ROUNDS rounds each;
  (c) asha: `bayesian` + ASHA over rounds (min 1, max ROUNDS, reduction 3), TRIALS trials.
Dollars: every round a trial ran, priced as the participants' instance-seconds a round of that
trial takes (the median gap between its consecutive rounds in its rounds table, leaving out the
gaps across a pause at an ASHA rung, which hold the wait for promotion and the relaunch) at the
built-in catalog's on-demand prices: 5 clients on gpu.1x and an aggregator on cpu.small in each
of us-east-1 and eu-west-1. A trial with no such gap takes the median of its study's.
A federated search does not bill its trials' participants on pools yet, so the bench prices
their measured time itself, alike for the three.
With --dp (a fixed noise multiplier): (c) with clip_norm tuned too, reporting the study's
epsilon under composition, and a random-stopping study (random sampler, mean 10 trials) whose
epsilon is compared with one trial's.
Raw records go to raw/SEED-*.json; the summary to RESULTS.md via --report.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PRICE_PER_SECOND = (5 * 2.4 + 0.2 + 5 * 2.64 + 0.22) / 3600  # us-east-1 + eu-west-1, on-demand

FEDERATION = """federation:
  regions: [{name: us-east-1, clients: 5}, {name: eu-west-1, clients: 5}]
  rounds: %(rounds)d
  round_deadline: 60s
  partition: dirichlet
  dirichlet_alpha: 0.3
  examples_per_client: 500
  validation_examples: 2000
  secure_aggregation: false
  seed: %(seed)d
%(dp)s"""

SPACE = """parameters:
  local_lr: {type: float, min: 0.02, max: 0.2, log: true, grid_points: %(points)d}
  local_epochs: {type: int, min: 1, max: %(epochs)d}
  server_lr: {type: float, min: 0.03, max: 1.0, log: true, grid_points: %(points)d}
  server_optimizer: {type: categorical, values: [fedavg, fedadam]}
  proximal_mu: {type: float, min: 0, max: 0.05, grid_points: %(points)d}
%(clip)s"""

HEAD = """name: %(name)s
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "64"}}
"""


def experiment(kind, seed, rounds, trials, dp, points=2):
    dp_block = "  dp: {noise_multiplier: 0.8, clip_norm: 1.0, delta: 1.0e-5}\n" if dp else ""
    clip = "  clip_norm: {type: float, min: 0.3, max: 3.0, log: true}\n" if dp else ""
    text = HEAD % {"name": f"bench-tuning-{kind}"}
    if kind == "default":
        pass
    elif kind == "grid":
        text += SPACE % {"clip": clip, "points": points, "epochs": points}
        text += "search: {sampler: grid, max_trials: 1000, max_concurrent: 2}\n"
    elif kind == "asha":
        text += SPACE % {"clip": clip, "points": points, "epochs": points}
        text += (f"search: {{sampler: bayesian, seed: {seed}, max_trials: {trials}, "
                 f"max_concurrent: 2, scheduler: asha, fidelity: {{name: rounds, min: 1, "
                 f"max: {rounds}, reduction_factor: 3}}}}\n")
    elif kind == "stopping":
        text += SPACE % {"clip": clip, "points": points, "epochs": points}
        text += f"search: {{sampler: random, seed: {seed}, max_concurrent: 2}}\n"
        text += "privacy: {selection: random_stopping, mean_trials: 10}\n"
    return text + FEDERATION % {"rounds": rounds, "seed": seed, "dp": dp_block}


def run(bin_dir, text, work, kind):
    path = os.path.join(work, f"{kind}.yaml")
    with open(path, "w") as f:
        f.write(text)
    run_dir = os.path.join(work, kind)
    start = time.monotonic()
    p = subprocess.run([os.path.join(bin_dir, "sextant"), "run", path, "--run-dir", run_dir],
                       capture_output=True, text=True)
    wall = time.monotonic() - start
    if p.returncode != 0:
        sys.exit(f"{kind}: sextant run exited {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    r = subprocess.run([os.path.join(bin_dir, "sextant"), "results", run_dir, "--format", "json"],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout), wall


def rung_ends(rounds, kind):
    """The rounds after which an ASHA trial pauses (min 1, reduction 3, below the last)."""
    ends, r = set(), 1
    while kind == "asha" and r < rounds:
        ends.add(r)
        r *= 3
    return ends


def price(rec):
    """Round-seconds and dollars of a record's trials (see the module's docstring)."""
    ends = rung_ends(rec["rounds"], rec["kind"])
    per_trial, every = [], []
    for t in rec["trial_rounds"]:
        gaps = [b[1] - a[1] for a, b in zip(t, t[1:]) if b[0] == a[0] + 1 and a[0] not in ends]
        per_trial.append((len(t), statistics.median(gaps) if gaps else None))
        every += gaps
    fallback = statistics.median(every) if every else 0.0
    seconds = sum(n * (m if m is not None else fallback) for n, m in per_trial)
    return seconds, seconds * PRICE_PER_SECOND


def summarise(kind, doc, wall):
    if "trials" in doc and not any("rounds" in t for t in doc["trials"]) and "rounds" in doc:
        trials = [{"id": 1, "rounds": doc["rounds"], "value": doc["rounds"][-1]["accuracy"],
                   "state": doc["state"]}]
    else:
        trials = [{"id": t["id"], "rounds": t.get("rounds", []), "value": t.get("value"),
                   "state": t["state"]} for t in doc["trials"]]
    best = max((t["value"] for t in trials if t["state"] == "COMPLETED" and t["value"] is not None),
               default=None)
    out = {"kind": kind, "trials": len(trials),
           "rounds_run": sum(len(t["rounds"]) for t in trials), "best": best,
           "wall_seconds": wall,
           "trial_rounds": [[[r["round"], r["time"]] for r in t["rounds"]] for t in trials]}
    if "privacy" in doc and "study_epsilon" in doc["privacy"]:
        p = doc["privacy"]
        out["privacy"] = {k: p.get(k) for k in ("method", "study_epsilon", "composition_epsilon",
                                                "trials_drawn", "mean_trials", "rounds")}
        out["privacy"]["trial_epsilons"] = [t["epsilon"] for t in p.get("per_trial", [])]
    return out


def report(raw_name):
    records = []
    raw = os.path.join(HERE, raw_name)
    for name in sorted(os.listdir(raw)):
        if name.endswith(".json"):
            records.append(json.load(open(os.path.join(raw, name))))
    by = {}
    for r in records:
        r["round_seconds"], r["dollars"] = price(r)
        by.setdefault((r["dp"], r["kind"]), []).append(r)
    med = statistics.median
    lines = ["| setup | kind | seeds | best val_accuracy (median) | dollars (median) | rounds run "
             "(median) | wall s (median) |", "|---|---|---|---|---|---|---|"]
    for (dp, kind), rs in sorted(by.items()):
        bests = [r["best"] for r in rs if r["best"] is not None]
        lines.append(f"| {'DP' if dp else 'no DP'} | {kind} | {len(rs)} | "
                     f"{med(bests) if bests else float('nan'):.4f} | {med([r['dollars'] for r in rs]):.4f} | "
                     f"{med([r['rounds_run'] for r in rs]):.0f} | {med([r['wall_seconds'] for r in rs]):.0f} |")
    print("\n".join(lines))
    seeds = sorted({r["seed"] for r in records if not r["dp"]})
    for s in seeds:
        get = {r["kind"]: r for r in records if r["seed"] == s and not r["dp"]}
        if {"grid", "asha", "default"} <= set(get):
            g, a, d = get["grid"], get["asha"], get["default"]
            print(f"\nseed {s}: asha - grid best = {a['best'] - g['best']:+.4f} "
                  f"(target >= -0.01), asha / grid dollars = {a['dollars'] / g['dollars']:.3f} "
                  f"(target <= 0.1), asha - default = {a['best'] - d['best']:+.4f} (target >= 0.03)")
    for r in records:
        if r.get("privacy"):
            p = r["privacy"]
            one = max(p["trial_epsilons"]) if p["trial_epsilons"] else None
            print(f"\nDP seed {r['seed']} {r['kind']}: method {p['method']}, study epsilon "
                  f"{p['study_epsilon']:.3f} over {r['trials']} trials ({p['rounds']} rounds); one "
                  f"trial's largest epsilon {one if one is None else round(one, 3)}"
                  + (f"; composition would say {p['composition_epsilon']:.3f}; ratio to one "
                     f"trial's {p['study_epsilon'] / one:.2f} (target <= 3)"
                     if p["method"] == "random_stopping" and one else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(HERE, "../../../build/bin"))
    ap.add_argument("--seeds", default="1")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--kinds", default="default,asha,grid")
    ap.add_argument("--dp", action="store_true")
    ap.add_argument("--report", action="store_true")
    # Points per float dimension of the grid, and the most local epochs (1..points): 2 gives
    # 32 configurations, 3 gives 162 (the space (c) searches is the same either way).
    ap.add_argument("--grid-points", type=int, default=2)
    ap.add_argument("--raw", default="raw", help="folder of raw records, under this one")
    a = ap.parse_args()
    if a.report:
        report(a.raw)
        return
    os.makedirs(os.path.join(HERE, a.raw), exist_ok=True)
    for seed in [int(s) for s in a.seeds.split(",")]:
        for kind in a.kinds.split(","):
            with tempfile.TemporaryDirectory() as work:
                doc, wall = run(a.bin, experiment(kind, seed, a.rounds, a.trials, a.dp,
                                                  a.grid_points), work, kind)
                rec = summarise(kind, doc, wall)
                rec.update({"seed": seed, "dp": a.dp, "rounds": a.rounds,
                            "grid_points": a.grid_points, "load": os.getloadavg()[0]})
                rec["round_seconds"], rec["dollars"] = price(rec)
                name = f"{'dp-' if a.dp else ''}{seed}-{kind}.json"
                with open(os.path.join(HERE, a.raw, name), "w") as f:
                    json.dump(rec, f, indent=1)
                print(json.dumps({k: rec[k] for k in ("kind", "seed", "best", "dollars",
                                                      "rounds_run", "wall_seconds")}), flush=True)


if __name__ == "__main__":
    main()
