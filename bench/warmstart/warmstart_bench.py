#!/usr/bin/python3
"""Driver of the warm-start benchmark; bench/warmstart/run.sh calls it (see there for options).

For each (problem, seed): an earlier run (Sextant TPE, --old-trials trials) on the problem with
its inputs shifted (hpo_objective --shift F: the minimiser moves by -F * range in every numeric
parameter), then new runs of --trials trials on the unshifted problem:

  sextant bayesian / tpe, cold            no prior knowledge
  sextant bayesian / tpe, warm_start      search.warm_start: {runs: [the earlier run]}
  sextant tpe, enqueue best 10            search.enqueue: the earlier run's 10 best, then TPE
  optuna TPE, cold                        TPESampler(seed)
  optuna TPE, enqueue best 10             study.enqueue_trial() of the same 10, then TPE
  optuna5 TPE / GP, cold                  Optuna 5 TPESampler(seed) / GPSampler(seed)
  optuna5 TPE / GP, enqueue best 10       the same 10 through Optuna 5's enqueue_trial()

Optuna's searches run through bench/hpo/optuna_peer.py, one process each: Optuna 3.1 or, for
its o5-* samplers, Optuna 5 from the folder in $SEXTANT_OPTUNA5 (--optuna5 sets it).

Every method of one (problem, seed) sees the same earlier run. The figure is the median over
seeds of the simple regret after --trials trials of the new run (best value among its own
trials minus the known optimum; the earlier run's values never count). Writes RESULTS.md and
the raw per-search records (runs.jsonl).
"""
import argparse
import concurrent.futures
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "hpo"))
from bench_env import PY, OPTUNA5_ENV, cpu_model, fmt_s, loadavg, log, optuna5_missing, \
    optuna5_path, optuna5_version, versions  # noqa: E402
from hpo_bench import regret_at, fmt_regret, sextant_yaml  # noqa: E402

OPTUNA_PEER = os.path.join(os.path.dirname(HERE), "hpo", "optuna_peer.py")
ENQUEUED = 10
# (key, label, tool, sampler, how the earlier run is used)
METHODS = [
    ("sextant-bayesian-cold", "sextant bayesian, cold", "sextant", "bayesian", "cold"),
    ("sextant-bayesian-warm", "sextant bayesian, warm_start", "sextant", "bayesian", "warm"),
    ("sextant-tpe-cold", "sextant tpe, cold", "sextant", "tpe", "cold"),
    ("sextant-tpe-warm", "sextant tpe, warm_start", "sextant", "tpe", "warm"),
    ("sextant-tpe-enqueue", f"sextant tpe, enqueue best {ENQUEUED}", "sextant", "tpe", "enqueue"),
    ("optuna-tpe-cold", "optuna TPE, cold", "optuna", "tpe", "cold"),
    ("optuna-tpe-enqueue", f"optuna TPE, enqueue_trial best {ENQUEUED}", "optuna", "tpe",
     "enqueue"),
    ("optuna5-tpe-cold", "optuna5 TPE, cold", "optuna", "o5-tpe", "cold"),
    ("optuna5-tpe-enqueue", f"optuna5 TPE, enqueue_trial best {ENQUEUED}", "optuna", "o5-tpe",
     "enqueue"),
    ("optuna5-gp-cold", "optuna5 GP, cold", "optuna", "o5-gp", "cold"),
    ("optuna5-gp-enqueue", f"optuna5 GP, enqueue_trial best {ENQUEUED}", "optuna", "o5-gp",
     "enqueue"),
]
OPTUNA5_BUDGETS = (10, 20)   # trials of the new run at which the Optuna 5 comparison is made


def is_optuna5(method):
    return method[3].startswith("o5-")
PAIRS = [  # (cold, warm) pairs the targets are about
    ("sextant-bayesian-cold", "sextant-bayesian-warm"),
    ("sextant-tpe-cold", "sextant-tpe-warm"),
]


def flow(v):
    return json.dumps(v)   # JSON is valid YAML flow syntax


def sextant_search(args, problem, sampler, seed, trials, name, d, objective_args=(),
                   search_lines=()):
    """Runs one Sextant search in d/run and returns (values by trial, wall seconds, results)."""
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    exp = os.path.join(d, "experiment.yaml")
    with open(exp, "w") as f:
        f.write(sextant_yaml(problem, sampler, seed, trials, args.objective, objective_args,
                             search_lines, name=name))
    run_dir = os.path.join(d, "run")
    start = time.perf_counter()
    out = subprocess.run([args.sextant, "run", exp, "--run-dir", run_dir], capture_output=True,
                         text=True, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(f"sextant run exited {out.returncode} ({d}):\n{out.stderr[-2000:]}")
    doc = json.loads(subprocess.run([args.sextant, "results", run_dir, "--format", "json"],
                                    capture_output=True, text=True, check=True).stdout)
    rows = sorted(doc["trials"], key=lambda t: t["id"])
    values = [t["value"] if t["state"] == "COMPLETED" and isinstance(t["value"], (int, float))
              else None for t in rows]
    return values, wall, doc


def old_run(args, problem, seed):
    d = os.path.join(args.work, f"old-{problem['name']}-s{seed}")
    values, wall, doc = sextant_search(
        args, problem, "tpe", 100 + seed, args.old_trials, f"old-{problem['name']}-s{seed}", d,
        objective_args=["--shift", repr(args.shift)])
    done = [t for t in doc["trials"] if t["state"] == "COMPLETED" and t["value"] is not None]
    best = [t["params"] for t in sorted(done, key=lambda t: t["value"])[:ENQUEUED]]
    return {"dir": os.path.join(d, "run"), "values": values, "wall_s": wall, "best": best}


def new_run(args, problem, seed, method, old):
    key, _, tool, sampler, use = method
    if tool == "optuna":
        cmd = [PY, OPTUNA_PEER, "run", args.objective, problem["name"], sampler, str(seed),
               str(args.trials)]
        if use == "enqueue":
            path = os.path.join(args.work, f"enqueue-{problem['name']}-s{seed}.json")
            with open(path, "w") as f:
                json.dump(old["best"], f)
            cmd.append(path)
        start = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        if out.returncode != 0:
            raise RuntimeError(f"optuna_peer exited {out.returncode}:\n{out.stderr[-2000:]}")
        return {"values": json.loads(out.stdout)["values"], "wall_s": wall}
    lines = []
    if use == "warm":
        lines = [f"  warm_start: {{runs: [{flow(old['dir'])}]}}"]
    elif use == "enqueue":
        lines = ["  enqueue:"] + [f"    - {flow(p)}" for p in old["best"]]
    d = os.path.join(args.work, f"{key}-{problem['name']}-s{seed}")
    values, wall, doc = sextant_search(args, problem, sampler, seed, args.trials,
                                       f"{key}-{problem['name']}-s{seed}", d, search_lines=lines)
    r = {"values": values, "wall_s": wall}
    if use == "warm":
        r["priors"] = doc.get("warm_start", {}).get("observations")
    if not args.keep:
        shutil.rmtree(d, ignore_errors=True)
    return r


def run_all(args, problems):
    """Every earlier run, then every new search; at most --jobs at once. Returns the records."""
    records = []
    lock = threading.Lock()
    raw = open(args.raw, "w")
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs)
    start = time.perf_counter()
    olds = {}

    def record(r):
        with lock:
            records.append(r)
            raw.write(json.dumps(r) + "\n")
            raw.flush()
            log(f"[{len(records)}/{total}] {r['method']} {r['problem']} seed {r['seed']}: "
                f"regret@{args.trials} {fmt_regret(r.get('regret', math.inf))}, "
                f"{r['wall_s']:.1f}s; elapsed {fmt_s(time.perf_counter() - start)}")

    total = len(problems) * args.seeds * (1 + len(METHODS))
    futures = {}
    for p in problems:
        for s in range(1, args.seeds + 1):
            futures[pool.submit(old_run, args, p, s)] = (p, s)
    for fut in concurrent.futures.as_completed(list(futures)):
        p, s = futures[fut]
        old = fut.result()
        olds[p["name"], s] = old
        record({"method": "earlier run (sextant tpe, shifted)", "problem": p["name"], "seed": s,
                "values": old["values"], "wall_s": old["wall_s"], "best": old["best"],
                "regret": regret_at(old["values"], p["optimum"], len(old["values"]))})
    jobs = [(p, s, m) for s in range(1, args.seeds + 1) for p in problems for m in METHODS
            if not args.methods or m[0] in args.methods.split(",")]

    def one(job):
        p, s, m = job
        r = new_run(args, p, s, m, olds[p["name"], s])
        r.update({"method": m[0], "problem": p["name"], "seed": s,
                  "regret": regret_at(r["values"], p["optimum"], args.trials)})
        record(r)

    for fut in concurrent.futures.as_completed([pool.submit(one, j) for j in jobs]):
        fut.result()
    pool.shutdown()
    raw.close()
    if not args.keep:
        for old in olds.values():
            shutil.rmtree(os.path.dirname(old["dir"]), ignore_errors=True)
    return records


def quartiles(xs):
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def optuna5_comparison(args, problems, records):
    """Issue 37's share: at each (problem, budget k), the median regret after k trials of
    Sextant's best method (cold or seeded) against Optuna 5's best. Returns report lines."""
    sext = [m for m in METHODS if m[2] == "sextant"]
    five = [m for m in METHODS if is_optuna5(m)]
    have = {r["method"] for r in records}
    if not any(m[0] in have for m in five):
        return []
    by = {}
    for r in records:
        by.setdefault((r["method"], r["problem"]), []).append(r)
    budgets = [k for k in OPTUNA5_BUDGETS if k <= args.trials]
    L = ["### Against Optuna 5 (issue 37)", "",
         "Median regret after k trials of the new run; Sextant's best method against Optuna 5's "
         "best, cold or seeded alike (lower is better):", "",
         "| problem | k | Sextant's best (median) | Optuna 5's best (median) | Sextant at or "
         "below |", "| --- | ---: | --- | --- | --- |"]
    wins, total, behind = 0, 0, []
    for p in problems:
        for k in budgets:
            med = {m: statistics.median(regret_at(r["values"], p["optimum"], k)
                                        for r in by[m[0], p["name"]])
                   for m in sext + five if (m[0], p["name"]) in by}
            bs = min((m for m in sext if m in med), key=lambda m: med[m])
            bo = min((m for m in five if m in med), key=lambda m: med[m])
            ok = med[bs] <= med[bo]
            wins += ok
            total += 1
            if not ok:
                behind.append(f"{p['name']} at {k} trials ({bo[1]} {fmt_regret(med[bo])} vs "
                              f"{bs[1]} {fmt_regret(med[bs])})")
            L.append(f"| {p['name']} | {k} | {bs[1]} ({fmt_regret(med[bs])}) | {bo[1]} "
                     f"({fmt_regret(med[bo])}) | {'yes' if ok else 'no'} |")
    frac = wins / total if total else 0
    L += ["", f"Sextant at or below Optuna 5's best median regret on **{wins}/{total} (problem, "
          f"budget) pairs ({frac:.0%}) — target 80% {'met' if frac >= 0.8 else 'not met'}**. "
          "Optuna 5 ahead: " + ("; ".join(behind) if behind else "nowhere") + ".", ""]
    return L


def write_results(args, problems, records, wall, version_line):
    by = {}
    for r in records:
        by.setdefault((r["method"], r["problem"]), []).append(r)
    med, iqr = {}, {}
    for (m, p), rs in by.items():
        regrets = sorted(r["regret"] for r in rs)
        med[m, p] = statistics.median(regrets)
        iqr[m, p] = quartiles(regrets)
    L = ["# Warm start: Sextant vs Optuna — regret of a new run seeded by an earlier one", ""]
    L.append(f"Generated by `bench/warmstart/run.sh` ({time.strftime('%Y-%m-%d %H:%M %Z')}, "
             f"{wall / 60:.1f} min in all). {args.seeds} seeds; every search sequential (one "
             f"trial at a time), at most {args.jobs} searches at once. Command: "
             f"`bench/warmstart/run.sh BUILD {args.cmdline}`.".replace(" `.", "`."))
    L.append("")
    L.append(f"- Machine: {platform.machine()}, {os.cpu_count()} CPUs ({cpu_model()}), shared "
             f"with other work; load average (1/5/15 min) before the run: "
             f"{args.load_before or 'not recorded'}, after: {loadavg()}.")
    L.append(f"- {version_line}.")
    L.append(f"- The earlier run: `sextant run` with `sampler: tpe`, seed 100 + s, "
             f"{args.old_trials} trials, on the problem with its inputs shifted by "
             f"{args.shift:g} of each range (`hpo_objective --shift {args.shift:g}`: a float or "
             f"int parameter x is evaluated at x + {args.shift:g} (max - min), ints rounded), so "
             f"its minimiser sits {args.shift:g} of the range below the new problem's in every "
             "numeric parameter (the categorical of `mixed6` is not shifted) and the minimum "
             "keeps its value.")
    L.append(f"- The new runs: {args.trials} trials on the unshifted problem, seed s "
             f"(s = 1..{args.seeds}), through the same objective command as bench/hpo. "
             "warm_start names the earlier run directory (its completed trials become prior "
             "observations; they are not trials of the new run). enqueue and Optuna's "
             f"`enqueue_trial` get the earlier run's {ENQUEUED} best configurations, which are "
             f"the new run's first {ENQUEUED} trials; Optuna uses in-memory storage. Optuna has no "
             "counterpart of warm_start (a sampler that learns from another study's trials "
             "without running them), in 3.1 or 5; enqueue_trial is its way.")
    L.append("- Optuna 5 (5.0 defaults plus the seed, each search in a process of its own through "
             "`bench/hpo/optuna_peer.py`): `TPESampler` (multivariate, constant liar, 10 startup "
             "trials) and `GPSampler` (10 random startup trials, then a Matérn 5/2 ARD GP and "
             "logEI); with enqueue_trial the 10 enqueued trials are the startup trials, so both "
             "model from trial 11 on.")
    L.append(f"- Simple regret after k trials = best value among the new run's first k trials "
             "minus the known optimum; the tables give the median (and interquartile range) "
             "over seeds.")
    L.append("")
    L.append(f"## Median simple regret after {args.trials} trials ({args.seeds} seeds; lower is "
             "better, best per row in bold)")
    L.append("")
    cols = [m for m in METHODS]
    L.append("| problem | " + " | ".join(m[1] for m in cols) + " |")
    L.append("| --- | " + " | ".join("---:" for _ in cols) + " |")
    for p in problems:
        vals = [med.get((m[0], p["name"]), math.inf) for m in cols]
        best = min(vals)
        L.append(f"| {p['name']} | " + " | ".join(
            (f"**{fmt_regret(v)}**" if v == best else fmt_regret(v)) for v in vals) + " |")
    L.append("")
    L.append("Interquartile range (25th–75th percentile over seeds):")
    L.append("")
    L.append("| problem | " + " | ".join(m[1] for m in cols) + " |")
    L.append("| --- | " + " | ".join("---:" for _ in cols) + " |")
    for p in problems:
        L.append(f"| {p['name']} | " + " | ".join(
            f"{fmt_regret(iqr[m[0], p['name']][0])}–{fmt_regret(iqr[m[0], p['name']][1])}"
            for m in cols) + " |")
    L.append("")
    olds = [r for r in records if r["method"].startswith("earlier run")]
    L.append("The earlier runs themselves (on the shifted problem, all "
             f"{args.old_trials} trials): median regret " + ", ".join(
                 f"{p['name']} {fmt_regret(statistics.median(r['regret'] for r in olds if r['problem'] == p['name']))}"
                 for p in problems) + ".")
    priors = sorted({r.get("priors") for r in records if "priors" in r})
    L.append(f"Prior observations per warm-started run (from `sextant results`): "
             f"{', '.join(str(x) for x in priors)}.")
    walls = {}
    for r in records:
        walls.setdefault(r["method"], []).append(r["wall_s"])
    L.append("Median wall time of one search: " + ", ".join(
        f"{label} {statistics.median(walls[key]):.1f}s" for key, label, *_ in cols if key in walls)
        + f"; the earlier run {statistics.median(r['wall_s'] for r in olds):.1f}s.")
    L.append("")
    L.append("## Targets")
    L.append("")
    L.append("Warm start at least 2x lower median regret than a cold start on at least 2 of 3 "
             "problems, and never worse than cold by more than noise (here: a warm median above "
             "the cold run's 75th percentile counts as worse):")
    L.append("")
    for cold, warm in PAIRS:
        label = dict((m[0], m[1]) for m in METHODS)[warm]
        parts, wins, worse = [], 0, []
        for p in problems:
            c, w = med[cold, p["name"]], med[warm, p["name"]]
            ratio = c / w if w > 0 else math.inf
            wins += ratio >= 2
            if w > iqr[cold, p["name"]][1]:
                worse.append(p["name"])
            parts.append(f"{p['name']} {fmt_regret(c)} -> {fmt_regret(w)} "
                         f"({'inf' if ratio == math.inf else f'{ratio:.3g}'}x)")
        ok = wins >= min(2, len(problems)) and not worse
        L.append(f"- {label}: cold -> warm median regret " + "; ".join(parts) +
                 f". 2x or better on {wins}/{len(problems)}" +
                 (f"; worse than cold beyond noise on {', '.join(worse)}" if worse else
                  "; never worse than cold beyond noise") +
                 f" — **{'met' if ok else 'not met'}**.")
    L.append("")
    L.append("Side by side with Optuna's way of reusing an earlier study (`enqueue_trial` of its "
             f"best {ENQUEUED}): " + "; ".join(
                 f"{p['name']}: optuna TPE enqueue {fmt_regret(med['optuna-tpe-enqueue', p['name']])}"
                 f" vs sextant bayesian warm_start "
                 f"{fmt_regret(med['sextant-bayesian-warm', p['name']])}, sextant tpe warm_start "
                 f"{fmt_regret(med['sextant-tpe-warm', p['name']])}" for p in problems) + ".")
    L.append("")
    L.append("Side by side with Optuna 5's `enqueue_trial` of the same best "
             f"{ENQUEUED}: " + "; ".join(
                 f"{p['name']}: optuna5 TPE enqueue "
                 f"{fmt_regret(med.get(('optuna5-tpe-enqueue', p['name']), math.inf))}, "
                 f"optuna5 GP enqueue "
                 f"{fmt_regret(med.get(('optuna5-gp-enqueue', p['name']), math.inf))}"
                 for p in problems) + ".")
    L.append("")
    L += optuna5_comparison(args, problems, records)
    L.append(f"Raw records: `bench/warmstart/runs.jsonl` (one line per search: method, problem, "
             "seed, every trial's value in order, wall time; the earlier runs' lines also hold "
             f"their {ENQUEUED} best configurations).")
    text = "\n".join(L) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        # Keep the section written by hand (the analysis of the Optuna 5 comparison, which says
        # which run it read).
        old = open(args.out).read() if os.path.exists(args.out) else ""
        begin, end = "<!-- optuna5-analysis: begin", "<!-- optuna5-analysis: end -->"
        if begin in old and end in old:
            text += "\n" + old[old.index(begin):old.index(end) + len(end)] + "\n"
        with open(args.out, "w") as f:
            f.write(text)
        log(f"warmstart_bench: wrote {args.out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", help="CMake build directory (bin/sextant, bench/hpo_objective)")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--old-trials", type=int, default=100)
    ap.add_argument("--shift", type=float, default=0.1)
    ap.add_argument("--problems", default="branin,hartmann6,mixed6")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(HERE, "RESULTS.md"))
    ap.add_argument("--raw", default=os.path.join(HERE, "runs.jsonl"))
    ap.add_argument("--work", default="")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--methods", default="",
                    help="only these method keys (comma-separated); writes the raw records only")
    ap.add_argument("--optuna5", default=None,
                    help="Optuna 5 source folder, the one holding optuna/ (default "
                    "$SEXTANT_OPTUNA5, else /work/shared/peers/optuna5)")
    ap.add_argument("--load-before", default="")
    ap.add_argument("--cmdline", default="")
    args = ap.parse_args()
    args.jobs = max(1, min(args.jobs, 2))
    build = os.path.abspath(args.build)
    args.sextant = os.path.join(build, "bin", "sextant")
    args.objective = os.path.join(build, "bench", "hpo_objective")
    for path in (args.sextant, args.objective):
        if not os.access(path, os.X_OK):
            sys.exit(f"warmstart_bench: {path} missing; build it (ninja -C {args.build} sextant "
                     "sextant-worker hpo_objective)")
    problems = json.loads(subprocess.run([args.objective, "--list"], capture_output=True,
                                         text=True, check=True).stdout)
    names = [n for n in args.problems.split(",") if n]
    unknown = set(names) - {p["name"] for p in problems}
    if unknown:
        sys.exit(f"warmstart_bench: unknown problems {sorted(unknown)}")
    problems = [p for p in problems if p["name"] in names]
    chosen = [m for m in METHODS if not args.methods or m[0] in args.methods.split(",")]
    five = any(is_optuna5(m) for m in chosen)
    if five:
        missing = optuna5_missing(args.optuna5)
        if missing:
            sys.exit(f"warmstart_bench: {missing} (--methods without the optuna5-* ones runs "
                     "the rest, recording runs.jsonl only)")
        os.environ[OPTUNA5_ENV] = optuna5_path(args.optuna5)   # read by hpo/optuna_peer.py
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    args.work = os.path.abspath(args.work) if args.work else \
        tempfile.mkdtemp(prefix="sextant-warmstart-bench.")
    os.makedirs(args.work, exist_ok=True)
    log(f"warmstart_bench: {len(problems)} problems x {args.seeds} seeds: {args.old_trials}-trial "
        f"earlier runs, then {len(METHODS)} methods x {args.trials} trials; scratch {args.work}")
    version_line = versions()
    if five:
        version_line += "; " + (optuna5_version(args.optuna5) or "Optuna 5: version unknown")
    start = time.perf_counter()
    records = run_all(args, problems)
    wall = time.perf_counter() - start
    log(f"warmstart_bench: done in {fmt_s(wall)}")
    if args.methods:
        by = {}
        for r in records:
            by.setdefault((r["method"], r["problem"]), []).append(r["regret"])
        for (m, p), regrets in sorted(by.items()):
            log(f"{m} {p}: median regret {fmt_regret(statistics.median(regrets))}")
    else:
        write_results(args, problems, records, wall, version_line)
    if not args.keep:
        shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
