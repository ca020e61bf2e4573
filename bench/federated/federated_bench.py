#!/usr/bin/env python3
"""Buffered asynchronous rounds (federation.mode: buffered) against synchronous FedAvg.

2 regions x 5 clients on non-IID Fashion-MNIST (Dirichlet 0.5, 1,000 examples each), the
built-in CNN; 3 of the 10 clients are 5x slower (federation.stragglers: each sleeps 4x its own
training time after training). Each run goes until its global validation accuracy first reaches
the target; the figure is the wall time from federation_ready (every client up: the same
start-up for both modes) to the first round row at or above the target, median over the runs.
Runs alternate sync, buffered, sync, ... so that machine noise hits both alike.
"""
import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time

COMMON = """objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: cnn, dataset: fashion-mnist}
budget: {max_wall_time: %(wall)s}
federation:
  regions:
    - {name: east, clients: 5}
    - {name: west, clients: 5}
  local_epochs: 1
  local_batch_size: 32
  local_lr: 0.05
  partition: dirichlet
  dirichlet_alpha: 0.5
  seed: %(seed)d
  examples_per_client: 1000
  validation_examples: 2000
  secure_aggregation: false
  stragglers: {clients: [east/0, east/1, west/0], slowdown: 5}
"""
MODES = {
    "sync": "  rounds: 45\n",
    "buffered": ("  rounds: 150\n  mode: buffered\n  buffer_size: 6\n  max_staleness: 8\n"
                 "  server_lr: 0.8\n  eval_every: 3\n"),
}


def run_once(build, work, mode, seed, target, wall, secure=False):
    d = os.path.join(work, "%s%s-%d" % ("secure-" if secure else "", mode, seed))
    os.makedirs(d, exist_ok=True)
    exp = os.path.join(d, "exp.yaml")
    common = COMMON % {"seed": seed, "wall": wall}
    if secure:
        common = common.replace("secure_aggregation: false", "secure_aggregation: true")
    with open(exp, "w") as f:
        f.write("name: bench-fl-%s\n" % mode + common + MODES[mode])
    run_dir = os.path.join(d, "run")
    subprocess.run(["rm", "-rf", run_dir], check=True)
    start = time.time()
    p = subprocess.run([os.path.join(build, "bin", "sextant"), "run", exp, "--run-dir", run_dir],
                       capture_output=True, text=True)
    wall_s = time.time() - start
    db = sqlite3.connect(os.path.join(run_dir, "state.db"))
    ready = db.execute("SELECT MIN(time) FROM events WHERE kind = 'federation_ready'").fetchone()[0]
    first = db.execute("SELECT MIN(time) FROM events").fetchone()[0]
    hit = db.execute("SELECT MIN(round), MIN(time) FROM rounds WHERE region = '' AND accuracy >= ?",
                     (target,)).fetchone()
    rows = db.execute("SELECT round, time, accuracy, clients FROM rounds WHERE region = '' "
                      "ORDER BY round").fetchall()
    updates = sum(r[3] for r in rows if hit[0] is None or r[0] <= hit[0])
    rejected = db.execute("SELECT SUM(rejected) FROM rounds WHERE region = ''").fetchone()[0]
    return {
        "mode": mode, "secure": secure, "seed": seed, "exit": p.returncode, "target": target,
        "ready_after_s": ready - first if ready and first else None,
        "seconds_to_target": (hit[1] - (ready - first)) if hit[1] is not None and ready else None,
        "steps_to_target": hit[0], "updates_to_target": updates if hit[0] else None,
        "final_accuracy": rows[-1][2] if rows else None, "steps": len(rows), "wall_s": wall_s,
        "rejected": rejected,
    }


def compression_once(build, work, mode, rounds, secure=False):
    """One synchronous run with update_compression `mode` and no stragglers, plaintext or under
    secure aggregation: the bytes every client put on the wire per round and the final
    accuracy."""
    d = os.path.join(work, "compression-%s%s" % ("secure-" if secure else "", mode))
    os.makedirs(d, exist_ok=True)
    exp = os.path.join(d, "exp.yaml")
    common = COMMON.replace("  stragglers: {clients: [east/0, east/1, west/0], slowdown: 5}\n", "")
    if secure:
        common = common.replace("secure_aggregation: false", "secure_aggregation: true")
    with open(exp, "w") as f:
        f.write("name: bench-fl-compression\n" + common % {"seed": 1, "wall": "10m"} +
                "  rounds: %d\n  update_compression: %s\n" % (rounds, mode))
    run_dir = os.path.join(d, "run")
    subprocess.run(["rm", "-rf", run_dir], check=True)
    p = subprocess.run([os.path.join(build, "bin", "sextant"), "run", exp, "--run-dir", run_dir],
                       capture_output=True, text=True)
    sent, model_bytes, updates = 0, 0, 0
    for name in os.listdir(os.path.join(run_dir, "logs")):
        if not name.startswith("client-"):
            continue
        for line in open(os.path.join(run_dir, "logs", name)):
            if line.startswith("client_done"):
                f = dict(kv.split("=") for kv in line.split()[1:])
                sent += int(f["bytes_sent"])
                model_bytes = int(f["model_bytes"])
                updates += int(f["rounds"])
    db = sqlite3.connect(os.path.join(run_dir, "state.db"))
    acc = db.execute("SELECT accuracy FROM rounds WHERE region = '' ORDER BY round DESC LIMIT 1"
                     ).fetchone()
    return {"compression": mode, "secure": secure, "exit": p.returncode, "rounds": rounds,
            "updates": updates,
            "bytes_sent": sent, "bytes_per_round": sent / rounds, "model_bytes": model_bytes,
            "final_accuracy": acc[0] if acc else None}


def compression_table(a):
    rows = []
    with open(a.raw, "a") as raw:
        for mode in ("none", "int8") if a.secure else ("none", "fp16", "int8"):
            r = compression_once(a.build, a.work, mode, a.compression_rounds, a.secure)
            r["when"] = time.strftime("%Y-%m-%dT%H:%M:%S")
            rows.append(r)
            raw.write(json.dumps(r) + "\n")
            print(json.dumps(r), file=sys.stderr, flush=True)
    base = rows[0]
    print("| update_compression | client bytes per round | vs none | final accuracy | vs none |")
    print("|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s | %.3fx | %.4f | %+.4f |" % (
            r["compression"], "{:,.0f}".format(r["bytes_per_round"]),
            r["bytes_per_round"] / base["bytes_per_round"], r["final_accuracy"],
            r["final_accuracy"] - base["final_accuracy"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=1, help="runs use seeds from here on")
    ap.add_argument("--target", type=float, default=0.85)
    ap.add_argument("--wall", default="8m")
    ap.add_argument("--work", default="/tmp/sextant-bench-federated")
    ap.add_argument("--raw", default=os.path.join(os.path.dirname(__file__), "runs.jsonl"))
    ap.add_argument("--compression", action="store_true",
                    help="the update_compression table instead (sync, no stragglers)")
    ap.add_argument("--compression-rounds", type=int, default=20)
    ap.add_argument("--secure", action="store_true",
                    help="none and int8 under secure aggregation (with --compression), or "
                         "buffered against sync both under secure aggregation")
    a = ap.parse_args()
    if a.compression:
        compression_table(a)
        return
    records = []
    with open(a.raw, "a") as raw:
        for i in range(a.runs):
            for mode in ("sync", "buffered"):
                r = run_once(a.build, a.work, mode, a.first_seed + i, a.target, a.wall, a.secure)
                r["when"] = time.strftime("%Y-%m-%dT%H:%M:%S")
                records.append(r)
                raw.write(json.dumps(r) + "\n")
                raw.flush()
                print(json.dumps(r), file=sys.stderr, flush=True)
    print("| mode | runs reaching %.2f | median s to target | median steps | median client updates |"
          " final accuracy |" % a.target)
    print("|---|---|---|---|---|---|")
    med = {}
    for mode in ("sync", "buffered"):
        rs = [r for r in records if r["mode"] == mode]
        ok = [r for r in rs if r["seconds_to_target"] is not None]
        m = statistics.median(r["seconds_to_target"] for r in ok) if ok else None
        med[mode] = m
        print("| %s | %d/%d | %s | %s | %s | %s |" % (
            mode, len(ok), len(rs), "%.1f" % m if m else "-",
            statistics.median(r["steps_to_target"] for r in ok) if ok else "-",
            statistics.median(r["updates_to_target"] for r in ok) if ok else "-",
            ", ".join("%.3f" % r["final_accuracy"] for r in rs if r["final_accuracy"])))
    if med.get("sync") and med.get("buffered"):
        print("\nbuffered reaches %.2f %.2fx sooner (median sync / median buffered)" %
              (a.target, med["sync"] / med["buffered"]))


if __name__ == "__main__":
    main()
