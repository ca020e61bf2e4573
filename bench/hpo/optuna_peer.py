#!/usr/bin/python3
"""Optuna peer for the HPO benchmark (bench/hpo/run.sh). Run with Debian's /usr/bin/python3
(python3-optuna 3.1, python3-cmaes for CmaEsSampler, python3-scipy for QMCSampler). The o5-*
samplers import Optuna 5 instead, from the source folder named by $SEXTANT_OPTUNA5 (default
/work/shared/peers/optuna5, put first on sys.path; its GPSampler runs on Debian's
python3-torch); one process imports one Optuna, so a sampler list may not mix the two.

  optuna_peer.py run OBJECTIVE PROBLEM SAMPLER SEED TRIALS [ENQUEUE_JSON]
      One study (in-memory storage, one process, trials one after another, as Sextant's
      max_concurrent: 1) of TRIALS trials; each trial runs `OBJECTIVE --problem PROBLEM
      --x0=... ...` through subprocess, exactly the command Sextant's trial.command runs, and
      reads `loss=` from its stdout. Prints one JSON object: {"values": [value or null, in trial
      order], "wall_s", "optuna"}. With ENQUEUE_JSON (a file holding a list of parameter
      objects), study.enqueue_trial() queues each first, in order (bench/warmstart).

  optuna_peer.py latency SAMPLERS NS DIM REPS MAX_SECONDS
      Suggestion latency: for each sampler (comma list) and N (comma list), a study holding N
      COMPLETE trials (study.add_trial(create_trial(...))) of a shifted Ackley in DIM
      dimensions on [-5,5]^DIM at uniformly random points (the same function as
      sampler_latency.cc); each repetition sets a fresh sampler (seed = repetition) and times
      study.ask() plus suggest_float for every parameter (relative sampling happens inside
      them), then tells the trial FAIL so it is not an observation for the next repetition.
      One untimed warm-up. Prints one JSON object per line, like sampler_latency (wall-clock
      and thread CPU time).

SAMPLER is one of: tpe (TPESampler defaults), tpe-mv (TPESampler(multivariate=True)),
cmaes (CmaEsSampler), qmc (QMCSampler), random (RandomSampler), all Optuna 3.1; o5-gp
(Optuna 5 GPSampler) and o5-tpe (Optuna 5 TPESampler with 5.0's defaults); each gets
seed=SEED.
"""
import json
import math
import os
import random
import subprocess
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_env  # noqa: E402

optuna = None   # imported by load_optuna: Debian's 3.1, or Optuna 5 for the o5-* samplers

SAMPLERS = {
    "o5-gp": lambda seed: optuna.samplers.GPSampler(seed=seed),
    "o5-tpe": lambda seed: optuna.samplers.TPESampler(seed=seed),
    "tpe": lambda seed: optuna.samplers.TPESampler(seed=seed),
    "tpe-mv": lambda seed: optuna.samplers.TPESampler(multivariate=True, seed=seed),
    "cmaes": lambda seed: optuna.samplers.CmaEsSampler(seed=seed),
    "qmc": lambda seed: optuna.samplers.QMCSampler(seed=seed),
    "random": lambda seed: optuna.samplers.RandomSampler(seed=seed),
}


def load_optuna(samplers):
    """Imports the Optuna the samplers need (bench_env.import_optuna); exits with a clear message
    when a list mixes Optuna 5's o5-* samplers with 3.1's."""
    global optuna
    five = {s.startswith("o5-") for s in samplers}
    if len(five) > 1:
        sys.exit("optuna_peer: o5-* samplers (Optuna 5) and Optuna 3.1 samplers cannot share "
                 "one process; list them separately")
    optuna = bench_env.import_optuna(True in five)


def quiet():
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    # ExperimentalWarning (multivariate TPE, QMC) and CMA-ES's "falls back to independent
    # sampling" for categoricals: expected, once per study, not interesting here.
    warnings.filterwarnings("ignore")


def problem_spec(objective, name):
    problems = json.loads(subprocess.run([objective, "--list"], capture_output=True, text=True,
                                         check=True).stdout)
    for p in problems:
        if p["name"] == name:
            return p
    sys.exit(f"optuna_peer: unknown problem {name}")


def fmt(v):
    return repr(v) if isinstance(v, float) else str(v)


def run(objective, problem, sampler, seed, trials, enqueue=None):
    spec = problem_spec(objective, problem)
    noisy = bool(spec.get("noise"))

    def evaluate(trial):
        argv = [objective, "--problem", problem] + (["--seed", str(seed)] if noisy else [])
        for p in spec["params"]:
            step = p.get("step")
            if p["type"] == "float":
                v = trial.suggest_float(p["name"], p["min"], p["max"], step=step)
            elif p["type"] == "int":
                v = trial.suggest_int(p["name"], int(p["min"]), int(p["max"]),
                                      step=int(step or 1))
            else:
                v = trial.suggest_categorical(p["name"], p["values"])
            argv.append(f"--{p['name']}={fmt(v)}")
        out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)
        metrics = {}
        for line in out.stdout.splitlines():
            for token in line.split():
                key, _, value = token.partition("=")
                metrics[key] = value
        if "true_loss" in metrics:
            trial.set_user_attr("true_loss", float(metrics["true_loss"]))
        if "loss" in metrics:
            return float(metrics["loss"])
        raise RuntimeError(f"no loss reported by {argv}")

    study = optuna.create_study(direction="minimize", sampler=SAMPLERS[sampler](seed))
    start = time.perf_counter()
    if enqueue:
        with open(enqueue) as f:
            for params in json.load(f):
                study.enqueue_trial(params)
    study.optimize(evaluate, n_trials=trials, gc_after_trial=False, catch=(Exception,))
    wall = time.perf_counter() - start
    trials_sorted = sorted(study.trials, key=lambda t: t.number)
    complete = [t.state == optuna.trial.TrialState.COMPLETE for t in trials_sorted]
    values = [t.value if ok else None for t, ok in zip(trials_sorted, complete)]
    out = {"values": values, "wall_s": wall, "optuna": optuna.__version__}
    if noisy:
        out["true_values"] = [t.user_attrs.get("true_loss") if ok else None
                              for t, ok in zip(trials_sorted, complete)]
    print(json.dumps(out))


def ackley(x):
    n = len(x)
    sq = cs = 0.0
    for i, xi in enumerate(x):
        z = xi - (1.3 - 0.37 * (i % 7))
        sq += z * z
        cs += math.cos(2 * math.pi * z)
    return -20 * math.exp(-0.2 * math.sqrt(sq / n)) - math.exp(cs / n) + 20 + math.e


def quantile(v, q):
    v = sorted(v)
    pos = q * (len(v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (pos - lo) * (v[hi] - v[lo])


def latency(samplers, ns, dim, reps, max_seconds):
    names = [f"x{d}" for d in range(dim)]
    dist = {n: optuna.distributions.FloatDistribution(-5.0, 5.0) for n in names}
    rng = random.Random(20240611)
    history = []
    for _ in range(max(ns)):
        x = [rng.uniform(-5.0, 5.0) for _ in names]
        history.append((dict(zip(names, x)), ackley(x)))
    for sampler in samplers:
        for n in ns:
            study = optuna.create_study(direction="minimize")
            for params, value in history[:n]:
                study.add_trial(optuna.trial.create_trial(params=params, distributions=dist,
                                                          value=value))
            ms, cpu = [], []
            start = time.perf_counter()
            for rep in range(-1, reps):  # rep -1: untimed warm-up
                c0, t0 = time.thread_time(), time.perf_counter()
                study.sampler = SAMPLERS[sampler](rep + 2)
                trial = study.ask()
                for name in names:
                    trial.suggest_float(name, -5.0, 5.0)
                t1, c1 = time.perf_counter(), time.thread_time()
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                if rep < 0:
                    continue
                ms.append((t1 - t0) * 1e3)
                cpu.append((c1 - c0) * 1e3)
                if len(ms) >= 5 and t1 - start > max_seconds:
                    break
            print(json.dumps({"tool": "optuna", "sampler": sampler, "n": n, "dim": dim,
                              "reps": len(ms), "median_ms": quantile(ms, 0.5),
                              "p95_ms": quantile(ms, 0.95), "min_ms": min(ms),
                              "max_ms": max(ms), "cpu_median_ms": quantile(cpu, 0.5),
                              "cpu_p95_ms": quantile(cpu, 0.95), "note": ""}), flush=True)


def main():
    if len(sys.argv) in (7, 8) and sys.argv[1] == "run":
        objective, problem, sampler, seed, trials = sys.argv[2:7]
        if sampler not in SAMPLERS:
            sys.exit(f"optuna_peer: unknown sampler {sampler} (one of {', '.join(SAMPLERS)})")
        load_optuna([sampler])
        quiet()
        run(objective, problem, sampler, int(seed), int(trials),
            sys.argv[7] if len(sys.argv) == 8 else None)
    elif len(sys.argv) == 7 and sys.argv[1] == "latency":
        _, _, samplers, ns, dim, reps, max_seconds = sys.argv
        samplers = [s for s in samplers.split(",") if s]
        for s in samplers:
            if s not in SAMPLERS:
                sys.exit(f"optuna_peer: unknown sampler {s}")
        load_optuna(samplers)
        quiet()
        latency(samplers, [int(n) for n in ns.split(",") if n], int(dim), int(reps),
                float(max_seconds))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
