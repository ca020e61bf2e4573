"""The 1 GB memory table: a model of random f32 tensors (make_model.py) federated by 3 regions x
2 clients whose command perturbs it (perturb.py), plaintext and under secure aggregation. Every
Sextant process's peak resident memory (VmHWM, sampled from /proc every 0.2 s) and the seconds
per round, against the model's own size.

usage: memory_bench.py BUILD_DIR [--megabytes 1024] [--rounds 2] [--work DIR] [--modes plain,secure]
"""
import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

EXPERIMENT = """name: bench-fl-memory
objective: {metric: train_loss, goal: minimize}
budget: {max_wall_time: 40m}
federation:
  regions: [{name: r1, clients: 2}, {name: r2, clients: 2}, {name: r3, clients: 2}]
  rounds: %(rounds)d
  min_clients: 6
  round_deadline: 1200s
  seed: 1
  data: own
  model: {file: %(model)s}
  client_command: [/usr/bin/python3, %(perturb)s]
  secure_aggregation: %(secure)s
"""


def role_of(cmdline):
    """'orchestrator', 'aggregator r1', 'client r1/0', 'evaluator' from a process's argv."""
    if os.path.basename(cmdline[0]) == "sextant":
        return "orchestrator"
    args = dict(zip(cmdline[1::2], cmdline[2::2]))
    role = args.get("--role", "?")
    if role == "client":
        return "client %s/%s" % (args.get("--region"), args.get("--index"))
    if role == "aggregator":
        return "aggregator %s" % args.get("--region")
    return role


def sample(run_dir, peaks):
    """Adds each of the run's live processes' VmHWM (kB) to peaks[role] (the max seen)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmdline = f.read().decode(errors="replace").split("\0")[:-1]
            if not cmdline or os.path.basename(cmdline[0]) not in ("sextant", "sextant-worker"):
                continue
            if not any(run_dir in a for a in cmdline) and "--role" not in cmdline:
                continue
            with open("/proc/%s/status" % pid) as f:
                hwm = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
        except (OSError, StopIteration, ValueError):
            continue
        role = role_of(cmdline)
        peaks[role] = max(peaks.get(role, 0), hwm)


def run_mode(a, model, secure):
    d = os.path.join(a.work, "secure" if secure else "plain")
    os.makedirs(d, exist_ok=True)
    exp = os.path.join(d, "exp.yaml")
    with open(exp, "w") as f:
        f.write(EXPERIMENT % {"rounds": a.rounds, "model": model,
                              "perturb": os.path.join(HERE, "perturb.py"),
                              "secure": "true" if secure else "false"})
    run_dir = os.path.join(d, "run")
    subprocess.run(["rm", "-rf", run_dir], check=True)
    peaks = {}
    start = time.time()
    p = subprocess.Popen([os.path.join(a.build, "bin", "sextant"), "run", exp, "--run-dir",
                          run_dir], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    while p.poll() is None:
        sample(run_dir, peaks)
        time.sleep(0.2)
    out = p.stdout.read()
    wall = time.time() - start
    db = sqlite3.connect(os.path.join(run_dir, "state.db"))
    times = [t for (t,) in db.execute(
        "SELECT time FROM rounds WHERE region = '' ORDER BY round")]
    rounds = [b - a_ for a_, b in zip(times, times[1:])]
    return {"mode": "secure" if secure else "plaintext", "exit": p.returncode,
            "wall_seconds": wall, "round_end_times": times, "round_seconds": rounds,
            "peak_rss_kb": peaks, "output_tail": out[-400:]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--megabytes", type=float, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", default="/tmp/sextant-bench-memory")
    ap.add_argument("--modes", default="plain,secure")
    ap.add_argument("--raw", default=os.path.join(HERE, "..", "runs.jsonl"))
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    os.makedirs(a.work, exist_ok=True)
    model = os.path.join(a.work, "init.safetensors")
    if not os.path.exists(model) or abs(os.path.getsize(model) / 2**20 - a.megabytes) > 1:
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "make_model.py"), model,
                        str(a.megabytes)], check=True)
    model_mb = os.path.getsize(model) / 2**20
    results = []
    with open(a.raw, "a") as raw:
        for mode in a.modes.split(","):
            r = run_mode(a, model, mode == "secure")
            r["model_mb"] = model_mb
            r["when"] = time.strftime("%Y-%m-%dT%H:%M:%S")
            raw.write(json.dumps(dict(r, bench="memory")) + "\n")
            print(json.dumps(r), file=sys.stderr, flush=True)
            results.append(r)
    print("| process | " + " | ".join("%s peak RSS (x model)" % r["mode"] for r in results) + " |")
    print("|---|" + "---|" * len(results))
    roles = sorted({k for r in results for k in r["peak_rss_kb"]})
    for role in roles:
        cells = []
        for r in results:
            kb = r["peak_rss_kb"].get(role)
            cells.append("%.0f MB (%.2fx)" % (kb / 1024, kb / 1024 / model_mb) if kb else "-")
        print("| %s | %s |" % (role, " | ".join(cells)))
    for r in results:
        print("%s: exit %d, seconds per round %s (first round ends %.1f s after start)" % (
            r["mode"], r["exit"], ["%.1f" % s for s in r["round_seconds"]],
            r["round_end_times"][0] if r["round_end_times"] else -1))


if __name__ == "__main__":
    main()
