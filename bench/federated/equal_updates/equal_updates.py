#!/usr/bin/env python3
"""Buffered asynchronous rounds against synchronous FedAvg at equal client updates.

2 regions x 4 clients on non-IID Fashion-MNIST (Dirichlet 0.5, 2,000 examples each), the
built-in MLP, every client at the same speed (no stragglers), plaintext. Two sampled fractions:
- all: sync samples all 8 clients a round; buffered steps once its buffers hold K = 8 updates;
- half: sync samples 4 of 8 (clients_per_round: 4); buffered steps at K = 4, with 4 of 8
  starting on each model version (clients_per_round: 4, the same sampled fraction), and
  "buffered-every" at K = 4 with every client training at once (no clients_per_round), as
  buffered ran before clients_per_round applied to it.
All run 20 rounds (steps), so each pair sees the same number of client updates (160 or 80);
the figure is the global validation accuracy after the last round, and the updates counted
from the rounds table. Runs alternate sync, buffered, ... per seed so that noise falls on both.
Raw records go to runs.jsonl beside this file.
"""
import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import time

COMMON = """objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "64"}}
federation:
  regions: [{name: east, clients: 4}, {name: west, clients: 4}]
  rounds: 20
  local_epochs: 1
  local_lr: 0.05
  partition: dirichlet
  dirichlet_alpha: 0.5
  examples_per_client: 2000
  validation_examples: 2000
  secure_aggregation: false
  seed: %(seed)d
"""
CONFIGS = {
    ("all", "sync"): "",
    ("all", "buffered"): "  mode: buffered\n  buffer_size: 8\n",
    ("half", "sync"): "  clients_per_round: 4\n",
    ("half", "buffered"): "  mode: buffered\n  buffer_size: 4\n  clients_per_round: 4\n",
    ("half", "buffered-every"): "  mode: buffered\n  buffer_size: 4\n",
}
MODES = {"all": ("sync", "buffered"), "half": ("sync", "buffered", "buffered-every")}


def run_once(build, work, fraction, mode, seed, extra):
    d = os.path.join(work, "%s-%s-%d" % (fraction, mode, seed))
    os.makedirs(d, exist_ok=True)
    exp = os.path.join(d, "exp.yaml")
    with open(exp, "w") as f:
        f.write("name: bench-fl-%s-%s\n" % (fraction, mode) + COMMON % {"seed": seed} +
                CONFIGS[(fraction, mode)] + extra)
    run_dir = os.path.join(d, "run")
    subprocess.run(["rm", "-rf", run_dir], check=True)
    start = time.time()
    p = subprocess.run([os.path.join(build, "bin", "sextant"), "run", exp, "--run-dir", run_dir],
                       capture_output=True, text=True)
    wall = time.time() - start
    if p.returncode != 0:
        raise SystemExit("%s %s seed %d failed:\n%s%s" % (fraction, mode, seed, p.stdout, p.stderr))
    # Each client's updates taken (its log's lines that sent bytes and were not turned away).
    per_client = {}
    logs = os.path.join(run_dir, "logs")
    for name in sorted(os.listdir(logs)):
        if name.startswith("client-"):
            with open(os.path.join(logs, name)) as f:
                per_client[name[7:-4]] = sum(1 for line in f if line.startswith("round=") and
                                             " bytes_sent=0" not in line and "rejected=" not in line)
    db = sqlite3.connect(os.path.join(run_dir, "state.db"))
    rows = db.execute("SELECT round, accuracy, clients, rejected FROM rounds WHERE region = '' "
                      "ORDER BY round").fetchall()
    return {"fraction": fraction, "mode": mode, "seed": seed, "extra": extra.strip(),
            "rounds": len(rows), "updates": sum(r[2] or 0 for r in rows),
            "rejected": sum(r[3] or 0 for r in rows),
            "accuracy": rows[-1][1] if rows else None,
            "best": max((r[1] for r in rows if r[1] is not None), default=None),
            "per_client": per_client, "wall_s": round(wall, 1), "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--fractions", default="all,half")
    ap.add_argument("--buffered-extra", default="",
                    help="YAML lines added under federation: for buffered runs (a fix to try)")
    ap.add_argument("--work", default="/tmp/sextant-bench-fl-equal")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "runs.jsonl"))
    a = ap.parse_args()
    extra = a.buffered_extra.replace("\\n", "\n")
    if extra and not extra.endswith("\n"):
        extra += "\n"
    recs = []
    with open(a.out, "a") as out:
        for seed in range(1, a.seeds + 1):
            for fraction in a.fractions.split(","):
                for mode in MODES[fraction]:
                    r = run_once(a.build, a.work, fraction, mode, seed,
                                 extra if mode.startswith("buffered") else "")
                    print(json.dumps(r), flush=True)
                    out.write(json.dumps(r) + "\n")
                    recs.append(r)
    print("\n| fraction | mode | updates | accuracy (median) | per seed | rejected | "
          "updates per client (min-max) |")
    print("|---|---|---|---|---|---|---|")
    for fraction in a.fractions.split(","):
        for mode in MODES[fraction]:
            rs = [r for r in recs if r["fraction"] == fraction and r["mode"] == mode]
            print("| %s | %s | %d | %.4f | %s | %d | %s |" % (
                fraction, mode, statistics.median(r["updates"] for r in rs),
                statistics.median(r["accuracy"] for r in rs),
                ", ".join("%.4f" % r["accuracy"] for r in rs),
                sum(r["rejected"] for r in rs),
                ", ".join("%d-%d" % (min(r["per_client"].values()), max(r["per_client"].values()))
                          for r in rs)))


if __name__ == "__main__":
    main()
