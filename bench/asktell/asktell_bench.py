"""Ask/tell overhead, side by side in one run: one Python client doing N ask/tell pairs of a
trivial objective against a live `sextant run` (search.mode ask_tell, random sampler) through the
Python client, against Optuna's ask/tell (RandomSampler) with in-memory storage and with SQLite
storage. Repeats are interleaved (Sextant, Optuna in-memory, Optuna SQLite, then again), and each
repeat starts from an empty run, study or database file.

usage: asktell_bench.py BUILD_DIR [--pairs N] [--repeats R] [--work DIR] [--out FILE] [--raw FILE]
"""
import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # bench_env
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "clients"))
import bench_env  # noqa: E402

SPACE = {"x": (-5.0, 10.0), "y": (0.0, 15.0)}


def objective(x, y):
    return (x - 0.3) ** 2 + (y - 1.7) ** 2


def experiment(pairs, seed):
    return f"""name: asktell-bench
objective: {{metric: loss, goal: minimize}}
parameters:
  x: {{type: float, min: {SPACE['x'][0]}, max: {SPACE['x'][1]}}}
  y: {{type: float, min: {SPACE['y'][0]}, max: {SPACE['y'][1]}}}
search:
  mode: ask_tell
  sampler: random
  seed: {seed}
  max_trials: {pairs}
  max_concurrent: 1
"""


def summary(name, seconds, asks, pairs, client_cpu, server_cpu=None):
    """One repeat: its rate, ask latencies, and the CPU time per pair of the client process
    (all its threads) and, for Sextant, of the `sextant run` process (its whole life, start-up
    included, as it reports it)."""
    asks = sorted(asks)
    return {"system": name, "pairs": pairs, "seconds": seconds, "rate": pairs / seconds,
            "ask_p50_ms": 1e3 * asks[len(asks) // 2],
            "ask_p99_ms": 1e3 * asks[min(len(asks) - 1, math.ceil(0.99 * len(asks)) - 1)],
            "client_cpu_ms_per_pair": 1e3 * client_cpu / pairs,
            "server_cpu_ms_per_pair": None if server_cpu is None else 1e3 * server_cpu / pairs}


def server_cpu_seconds(run_dir):
    """The CPU time `sextant run` recorded for itself when it ended (meta
    orchestrator_cpu_seconds in RUN_DIR/state.db), or None."""
    import sqlite3
    try:
        with sqlite3.connect(f"file:{run_dir}/state.db?mode=ro", uri=True) as c:
            row = c.execute("SELECT value FROM meta WHERE key = 'orchestrator_cpu_seconds'"
                            ).fetchone()
    except sqlite3.Error:
        return None
    if row is None:
        return None
    return float(row[0].decode() if isinstance(row[0], bytes) else row[0])


def run_sextant(work, pairs, seed):
    import sextant
    from live_run import LiveRun
    with LiveRun(work, experiment(pairs, seed), name=f"sextant-{seed}") as run:
        asks = []
        with sextant.open_run(run.dir) as study:
            study.ask(timeout=60)  # connects and warms the channel; told below, not timed
            study.tell(study.held[0], loss=1.0)
            start, cpu = time.perf_counter(), time.process_time()
            for _ in range(pairs - 1):
                t0 = time.perf_counter()
                trial = study.ask()
                asks.append(time.perf_counter() - t0)
                study.tell(trial, loss=objective(trial.params["x"], trial.params["y"]))
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            if study.ask() is not None:
                raise RuntimeError("the run served more trials than max_trials")
        rc = run.wait(60)
        if rc != 0:
            raise RuntimeError(f"sextant run exited {rc}:\n{run.output()}")
        told = sum(t["state"] == "COMPLETED" for t in run.results()["trials"])
        if told != pairs:
            raise RuntimeError(f"the run stored {told} completed trials, not {pairs}")
    return summary("Sextant (live run, Python client)", seconds, asks, pairs - 1, cpu,
                   server_cpu_seconds(run.dir))


def run_optuna(work, pairs, seed, storage):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = None
    if storage == "sqlite":
        url = f"sqlite:///{os.path.join(work, f'optuna-{seed}.db')}"
    study = optuna.create_study(storage=url, sampler=optuna.samplers.RandomSampler(seed=seed),
                                direction="minimize", study_name=f"bench-{seed}")
    dists = {k: optuna.distributions.FloatDistribution(lo, hi) for k, (lo, hi) in SPACE.items()}
    trial = study.ask(dists)  # the first pair, as for Sextant: not timed
    study.tell(trial, 1.0)
    asks = []
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(pairs - 1):
        t0 = time.perf_counter()
        trial = study.ask(dists)  # samples every parameter, as Sextant's ask does
        asks.append(time.perf_counter() - t0)
        study.tell(trial, objective(trial.params["x"], trial.params["y"]))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    if len(study.trials) != pairs:
        raise RuntimeError(f"optuna stored {len(study.trials)} trials, not {pairs}")
    name = "Optuna in-memory" if storage == "memory" else "Optuna SQLite"
    return summary(name, seconds, asks, pairs - 1, cpu)


def table(rows):
    by = {}
    for r in rows:
        by.setdefault(r["system"], []).append(r)
    base = statistics.median(r["rate"] for r in by.get("Optuna SQLite", [])) if "Optuna SQLite" in by else None
    lines = ["| system | pairs/s (median) | range | vs Optuna SQLite | ask p50 | ask p99 | "
             "client CPU / pair | server CPU / pair |",
             "|---|---|---|---|---|---|---|---|"]
    for name, rs in by.items():
        rate = statistics.median(r["rate"] for r in rs)
        lo, hi = min(r["rate"] for r in rs), max(r["rate"] for r in rs)
        p50 = statistics.median(r["ask_p50_ms"] for r in rs)
        p99 = statistics.median(r["ask_p99_ms"] for r in rs)
        ratio = f"{rate / base:.2f}x" if base else "-"
        client = statistics.median(r["client_cpu_ms_per_pair"] for r in rs)
        servers = [r["server_cpu_ms_per_pair"] for r in rs if r["server_cpu_ms_per_pair"]]
        server = f"{statistics.median(servers):.2f} ms" if servers else "-"
        lines.append(f"| {name} | {rate:,.0f} | {lo:,.0f}-{hi:,.0f} | {ratio} | {p50:.2f} ms | "
                     f"{p99:.2f} ms | {client:.2f} ms | {server} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--work", default=None, help="scratch folder (default: a fresh temporary one)")
    ap.add_argument("--raw", default=os.path.join(HERE, "raw.jsonl"))
    ap.add_argument("--systems", default="sextant,memory,sqlite")
    args = ap.parse_args()
    os.environ["SEXTANT_BIN_DIR"] = os.path.join(os.path.abspath(args.build), "bin")
    work = args.work or tempfile.mkdtemp(prefix="asktell-bench-", dir="/var/tmp")
    os.makedirs(work, exist_ok=True)
    load_before = bench_env.loadavg()
    version_line = bench_env.versions()  # the tree as the run starts
    bench_env.log(f"asktell: {args.pairs} pairs x {args.repeats} repeats in {work}, load {load_before}")
    rows = []
    started = time.monotonic()
    for rep in range(args.repeats):
        seed = rep + 1
        for system in args.systems.split(","):
            if system == "sextant":
                r = run_sextant(work, args.pairs, seed)
            else:
                r = run_optuna(work, args.pairs, seed, system)
            r.update(repeat=seed, load=bench_env.loadavg())
            rows.append(r)
            bench_env.log(f"  repeat {seed} {r['system']}: {r['rate']:.0f} pairs/s, ask p50 "
                          f"{r['ask_p50_ms']:.2f} ms p99 {r['ask_p99_ms']:.2f} ms (load {r['load']})")
    with open(args.raw, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(f"Run of {time.strftime('%Y-%m-%d', time.gmtime())}: {args.pairs} pairs, "
          f"{args.repeats} repeats, {bench_env.fmt_s(time.monotonic() - started)}; "
          f"{os.cpu_count()} cores ({bench_env.cpu_model()}), load average {load_before} before "
          f"and {bench_env.loadavg()} after; scratch on {work}.")
    print(version_line)
    print()
    print(table(rows))
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
