"""Ask/tell overhead, side by side in one run: one Python client doing N ask/tell pairs of a
trivial objective against a live `sextant run` (search.mode ask_tell, random sampler) through the
Python client, against Optuna's ask/tell (RandomSampler) with in-memory storage and with SQLite
storage, Optuna 3.1 and Optuna 5. Repeats are interleaved (each system once, then again), and each
repeat starts from an empty run, study or database file. Every Optuna repeat runs in a process of
its own (this script with --peer), so Optuna 3.1 and 5 never share one.

With a model: `sextant-bayesian` (a live run with sampler bayesian) and `o5-gp` (Optuna 5
GPSampler, in-memory) do --model-pairs pairs each (a GP's ask grows with the trials told, so
thousands of pairs would measure the model, not the ask/tell path).

usage: asktell_bench.py BUILD_DIR [--pairs N] [--model-pairs N] [--repeats R] [--systems LIST]
                        [--optuna5 DIR] [--work DIR] [--raw FILE]
  systems: sextant, memory, sqlite (Optuna 3.1), o5-memory, o5-sqlite (Optuna 5),
           sextant-bayesian, o5-gp
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # bench_env
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "clients"))
import bench_env  # noqa: E402

SPACE = {"x": (-5.0, 10.0), "y": (0.0, 15.0)}
NAMES = {
    "sextant": "Sextant (live run, Python client)",
    "memory": "Optuna in-memory", "sqlite": "Optuna SQLite",
    "o5-memory": "Optuna 5 in-memory", "o5-sqlite": "Optuna 5 SQLite",
    "sextant-bayesian": "Sextant bayesian (live run, Python client)",
    "o5-gp": "Optuna 5 GPSampler in-memory",
}
MODEL_SYSTEMS = ("sextant-bayesian", "o5-gp")


def objective(x, y):
    return (x - 0.3) ** 2 + (y - 1.7) ** 2


def experiment(pairs, seed, sampler="random"):
    return f"""name: asktell-bench
objective: {{metric: loss, goal: minimize}}
parameters:
  x: {{type: float, min: {SPACE['x'][0]}, max: {SPACE['x'][1]}}}
  y: {{type: float, min: {SPACE['y'][0]}, max: {SPACE['y'][1]}}}
search:
  mode: ask_tell
  sampler: {sampler}
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


def run_sextant(work, pairs, seed, system="sextant"):
    import sextant
    from live_run import LiveRun
    sampler = "bayesian" if system == "sextant-bayesian" else "random"
    with LiveRun(work, experiment(pairs, seed, sampler), name=f"{system}-{seed}") as run:
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
    return summary(NAMES[system], seconds, asks, pairs - 1, cpu, server_cpu_seconds(run.dir))


def run_optuna_process(work, pairs, seed, system, optuna5):
    """One Optuna repeat in a process of its own (this script with --peer); its summary."""
    cmd = [bench_env.PY, os.path.abspath(__file__), "--peer", system, "--pairs", str(pairs),
           "--seed", str(seed), "--work", work]
    if system.startswith("o5-"):
        cmd += ["--optuna5", optuna5]
    out = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                         env=dict(os.environ, OMP_NUM_THREADS="1"))
    if out.returncode != 0:
        raise RuntimeError(f"asktell peer {system} exited {out.returncode}:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout)


def run_optuna(work, pairs, seed, system, optuna5=None):
    """The --peer side: N pairs through Optuna's ask/tell in this process. Optuna 3.1 for
    memory and sqlite; Optuna 5 for o5-memory, o5-sqlite (RandomSampler) and o5-gp
    (GPSampler, 5.0 defaults)."""
    five = system.startswith("o5-")
    optuna = bench_env.import_optuna(five, optuna5)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = None
    if system.endswith("sqlite"):
        url = f"sqlite:///{os.path.join(work, f'optuna-{system}-{seed}.db')}"
    sampler = (optuna.samplers.GPSampler(seed=seed) if system == "o5-gp" else
               optuna.samplers.RandomSampler(seed=seed))
    study = optuna.create_study(storage=url, sampler=sampler, direction="minimize",
                                study_name=f"bench-{seed}")
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
    r = summary(NAMES[system], seconds, asks, pairs - 1, cpu)
    r["optuna"] = optuna.__version__
    return r


def table(rows):
    by = {}
    for r in rows:
        by.setdefault(r["system"], []).append(r)

    def rate_of(name):
        return statistics.median(r["rate"] for r in by[name]) if name in by else None
    bases = [(n, rate_of(n)) for n in (NAMES["sqlite"], NAMES["o5-sqlite"]) if n in by]
    lines = ["| system | pairs | pairs/s (median) | range | " +
             "".join(f"vs {n} | " for n, _ in bases) +
             "ask p50 | ask p99 | client CPU / pair | server CPU / pair |",
             "|---|---|---|---|" + "---|" * len(bases) + "---|---|---|---|"]
    for name, rs in by.items():
        rate = statistics.median(r["rate"] for r in rs)
        lo, hi = min(r["rate"] for r in rs), max(r["rate"] for r in rs)
        p50 = statistics.median(r["ask_p50_ms"] for r in rs)
        p99 = statistics.median(r["ask_p99_ms"] for r in rs)
        model = name in [NAMES[x] for x in MODEL_SYSTEMS]
        ratios = "".join("- | " if model else f"{rate / base:.2f}x | " for _, base in bases)
        client = statistics.median(r["client_cpu_ms_per_pair"] for r in rs)
        servers = [r["server_cpu_ms_per_pair"] for r in rs if r["server_cpu_ms_per_pair"]]
        server = f"{statistics.median(servers):.2f} ms" if servers else "-"
        lines.append(f"| {name} | {rs[0]['pairs'] + 1:,} | {rate:,.1f} | {lo:,.1f}-{hi:,.1f} | "
                     f"{ratios}{p50:.2f} ms | {p99:.2f} ms | {client:.2f} ms | {server} |")
    return "\n".join(lines)


def main():
    if "--peer" in sys.argv:
        return peer_main()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build")
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--model-pairs", type=int, default=100,
                    help="pairs of the systems with a model (sextant-bayesian, o5-gp)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--work", default=None, help="scratch folder (default: a fresh temporary one)")
    ap.add_argument("--raw", default=os.path.join(HERE, "raw.jsonl"))
    ap.add_argument("--systems",
                    default="sextant,memory,sqlite,o5-memory,o5-sqlite,sextant-bayesian,o5-gp")
    ap.add_argument("--optuna5", default=None,
                    help="Optuna 5 source folder, the one holding optuna/ (default "
                    "$SEXTANT_OPTUNA5, else /work/shared/peers/optuna5)")
    args = ap.parse_args()
    systems = [x for x in args.systems.split(",") if x]
    unknown = [x for x in systems if x not in NAMES]
    if unknown:
        sys.exit(f"asktell: unknown systems {unknown} ({', '.join(NAMES)})")
    if any(x.startswith("o5-") for x in systems):
        missing = bench_env.optuna5_missing(args.optuna5)
        if missing:
            sys.exit(f"asktell: {missing} (--systems without the o5-* ones)")
    args.optuna5 = bench_env.optuna5_path(args.optuna5)
    os.environ["SEXTANT_BIN_DIR"] = os.path.join(os.path.abspath(args.build), "bin")
    work = args.work or tempfile.mkdtemp(prefix="asktell-bench-", dir="/var/tmp")
    os.makedirs(work, exist_ok=True)
    load_before = bench_env.loadavg()
    version_line = bench_env.versions()  # the tree as the run starts
    if any(x.startswith("o5-") for x in systems):
        version_line += "; " + (bench_env.optuna5_version(args.optuna5) or "Optuna 5: unknown")
    bench_env.log(f"asktell: {args.pairs} pairs x {args.repeats} repeats in {work}, load {load_before}")
    rows = []
    started = time.monotonic()
    for rep in range(args.repeats):
        seed = rep + 1
        for system in systems:
            pairs = args.model_pairs if system in MODEL_SYSTEMS else args.pairs
            if system.startswith("sextant"):
                r = run_sextant(work, pairs, seed, system)
            else:
                r = run_optuna_process(work, pairs, seed, system, args.optuna5)
            r.update(repeat=seed, load=bench_env.loadavg())
            rows.append(r)
            bench_env.log(f"  repeat {seed} {r['system']}: {r['rate']:.0f} pairs/s, ask p50 "
                          f"{r['ask_p50_ms']:.2f} ms p99 {r['ask_p99_ms']:.2f} ms (load {r['load']})")
    with open(args.raw, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(f"Run of {time.strftime('%Y-%m-%d', time.gmtime())}: {args.pairs} pairs "
          f"({args.model_pairs} with a model), "
          f"{args.repeats} repeats, {bench_env.fmt_s(time.monotonic() - started)}; "
          f"{os.cpu_count()} cores ({bench_env.cpu_model()}), load average {load_before} before "
          f"and {bench_env.loadavg()} after; scratch on {work}.")
    print(version_line)
    print()
    print(table(rows))
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


def peer_main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", required=True, choices=[n for n in NAMES if not n.startswith("sextant")])
    ap.add_argument("--pairs", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--optuna5", default=None)
    a = ap.parse_args()
    print(json.dumps(run_optuna(a.work, a.pairs, a.seed, a.peer, a.optuna5)))


if __name__ == "__main__":
    main()
