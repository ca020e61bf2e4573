#!/usr/bin/python3
"""Multi-fidelity benchmark: best validation accuracy against epochs consumed, on the
examples/fashion-mnist/train.py MLP, for

  random       Sextant, sampler random, no scheduler: every trial trains all max epochs
  asha         Sextant, scheduler asha (promotion mode: pause at rungs, resume from checkpoints)
  hyperband    Sextant, scheduler hyperband (random sampler)
  bohb         Sextant, scheduler bohb (TPE)
  optuna-sh    Optuna 3.1 TPESampler + SuccessiveHalvingPruner
  optuna-hb    Optuna 3.1 TPESampler + HyperbandPruner
  optuna5-sh   Optuna 5 TPESampler (5.0 defaults) + SuccessiveHalvingPruner
  optuna5-hb   Optuna 5 TPESampler (5.0 defaults) + HyperbandPruner
  asha-stop    (optional) Sextant, scheduler asha, asha_mode stopping
  asha-tpe     (optional) Sextant, scheduler asha with the tpe sampler: the like-for-like of
               Optuna's TPE + SuccessiveHalvingPruner, shown beside the others but not counted
               in "Sextant's best" (which stays asha, hyperband and bohb)

one after another, each with two trials at once. Each Optuna study runs in a process of its own
(optuna_driver.py), so Optuna 3.1 and 5 never share one. Every epoch train.py trains is appended to a
per-method log (--epoch-log); the curve is the running maximum of val_accuracy over those epochs
in the order they finished. Totals: Sextant's `fidelity_consumed` for its schedulers, epochs
actually run (log lines) for Optuna, trials x max epochs for full-fidelity random search.

Run through run.sh; `run.sh --help` lists the options.
"""

import argparse
import json
import math
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
import bench_env  # noqa: E402
TRAIN = os.path.join(ROOT, "examples", "fashion-mnist", "train.py")
PY = "/usr/bin/python3"

SPACE = [
    {"name": "lr", "type": "float", "min": 1e-4, "max": 0.5, "log": True},
    {"name": "hidden", "type": "int", "min": 32, "max": 256, "log": True},
    {"name": "batch_size", "type": "int", "min": 32, "max": 256, "log": True},
    {"name": "weight_decay", "type": "float", "min": 1e-6, "max": 1e-2, "log": True},
    {"name": "optimizer", "type": "categorical", "values": ["sgd", "adam"]},
    {"name": "momentum", "type": "float", "min": 0.5, "max": 0.99, "log": False},
]

SEXTANT_METHODS = {
    # method: (scheduler, sampler, asha_mode)
    "random": (None, "random", None),
    "asha": ("asha", "random", "promotion"),
    "asha-stop": ("asha", "random", "stopping"),
    "hyperband": ("hyperband", "random", None),
    "bohb": ("bohb", "tpe", None),
    "asha-tpe": ("asha", "tpe", "promotion"),
}
OPTUNA_METHODS = {"optuna-sh": "sh", "optuna-hb": "hyperband",
                  "optuna5-sh": "sh", "optuna5-hb": "hyperband"}
# New methods go at the end: a method's seed is derived from its index here.
ALL_METHODS = ["random", "asha", "hyperband", "bohb", "optuna-sh", "optuna-hb", "asha-stop",
               "optuna5-sh", "optuna5-hb", "asha-tpe"]
DEFAULT_METHODS = ["random", "asha", "hyperband", "bohb", "optuna-sh", "optuna-hb",
                   "optuna5-sh", "optuna5-hb"]
LABEL = {
    "random": "random, full fidelity (Sextant, no scheduler)",
    "asha": "Sextant asha (promotion)",
    "asha-stop": "Sextant asha (stopping)",
    "asha-tpe": "Sextant asha + tpe sampler (not counted in Sextant's best)",
    "hyperband": "Sextant hyperband",
    "bohb": "Sextant bohb (TPE)",
    "optuna-sh": "Optuna TPE + SuccessiveHalvingPruner",
    "optuna-hb": "Optuna TPE + HyperbandPruner",
    "optuna5-sh": "Optuna 5 TPE + SuccessiveHalvingPruner",
    "optuna5-hb": "Optuna 5 TPE + HyperbandPruner",
}


def is_optuna5(method):
    return method.startswith("optuna5-")

PROFILES = {
    # Trials per method: random search at full fidelity gets `random` trials; the multi-fidelity
    # methods get trial caps that land near a third of random's epochs (ASHA ~3 epochs a trial
    # with eta 3; Hyperband's brackets ~7).
    "full": {"train_subset": 10000, "min_epochs": 1, "max_epochs": 27, "eta": 3,
             "trials": {"random": 20, "asha": 60, "asha-stop": 60, "hyperband": 26, "bohb": 26,
                        "optuna-sh": 60, "optuna-hb": 26, "optuna5-sh": 60, "optuna5-hb": 26,
                        "asha-tpe": 60}},
    "quick": {"train_subset": 2000, "min_epochs": 1, "max_epochs": 9, "eta": 3,
              "trials": {"random": 3, "asha": 9, "asha-stop": 9, "hyperband": 8, "bohb": 8,
                         "optuna-sh": 9, "optuna-hb": 8, "optuna5-sh": 9, "optuna5-hb": 8,
                         "asha-tpe": 9}},
}


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------ Sextant

def yaml_scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(str(v))  # a JSON string is a YAML double-quoted scalar


def experiment_yaml(name, method, cfg, seed, n_trials, epoch_log, cache_dir):
    scheduler, sampler, asha_mode = SEXTANT_METHODS[method]
    lines = [f"name: {name}",
             "objective: {metric: val_accuracy, goal: maximize}",
             "parameters:"]
    for p in SPACE:
        if p["type"] == "categorical":
            vals = ", ".join(p["values"])
            lines.append(f"  {p['name']}: {{type: categorical, values: [{vals}]}}")
        else:
            log_part = ", log: true" if p["log"] else ""
            lines.append(f"  {p['name']}: {{type: {p['type']}, min: {yaml_scalar(p['min'])}, "
                         f"max: {yaml_scalar(p['max'])}{log_part}}}")
    lines += ["search:", f"  sampler: {sampler}"]
    if scheduler:
        lines.append(f"  scheduler: {scheduler}")
        if asha_mode:
            lines.append(f"  asha_mode: {asha_mode}")
        lines.append(f"  fidelity: {{name: epoch, min: {cfg['min_epochs']}, "
                     f"max: {cfg['max_epochs']}, reduction_factor: {cfg['eta']}}}")
    lines += [f"  seed: {seed}", f"  max_trials: {n_trials}", "  max_concurrent: 2", "trial:"]
    cmd = [PY, TRAIN, "--train-subset", str(cfg["train_subset"]), "--epoch-log", epoch_log]
    if not scheduler:
        cmd += ["--epochs", str(cfg["max_epochs"])]
    lines.append("  command: [" + ", ".join(yaml_scalar(c) for c in cmd) + "]")
    lines.append("  timeout: 10m")
    lines.append("  env: {OPENBLAS_NUM_THREADS: \"1\", FASHION_MNIST_CACHE_DIR: "
                 f"{yaml_scalar(cache_dir)}}}")
    return "\n".join(lines) + "\n"


def run_sextant(build, method, cfg, seed, n_trials, mdir, cache_dir, keep):
    sextant = os.path.join(build, "bin", "sextant")
    epoch_log = os.path.join(mdir, "epochs.jsonl")
    exp = os.path.join(mdir, "experiment.yaml")
    rundir = os.path.join(mdir, "run")
    with open(exp, "w") as f:
        f.write(experiment_yaml(f"mf-{method}", method, cfg, seed, n_trials, epoch_log, cache_dir))
    v = subprocess.run([sextant, "validate", exp], capture_output=True, text=True)
    if v.returncode != 0:
        raise RuntimeError(f"sextant validate {exp} failed ({v.returncode}):\n{v.stderr}")
    t0 = time.monotonic()
    with open(os.path.join(mdir, "sextant.out"), "w") as out:
        # Its own session, so a Ctrl-C of the benchmark reaches it once, through us.
        p = subprocess.Popen([sextant, "run", exp, "--run-dir", rundir], stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait()
        except BaseException:
            p.send_signal(signal.SIGINT)
            p.wait()
            raise
    wall = time.monotonic() - t0
    if rc != 0:
        tail = open(os.path.join(mdir, "sextant.out")).read()[-2000:]
        raise RuntimeError(f"sextant run ({method}) exited {rc}:\n{tail}")
    r = subprocess.run([sextant, "results", rundir, "--format", "json"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError(f"sextant results failed ({r.returncode}): {r.stderr}")
    res = json.loads(r.stdout)
    with open(os.path.join(mdir, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    if not keep:
        shutil.rmtree(os.path.join(rundir, "artifacts", "checkpoints"), ignore_errors=True)

    trials = res["trials"]
    states = {}
    for t in trials:
        states[t["state"]] = states.get(t["state"], 0) + 1
    completed = [t["value"] for t in trials if t["state"] == "COMPLETED" and t["value"] is not None]
    summary = {
        "tool": "sextant", "trials": len(trials), "states": states, "wall_s": wall,
        "best_completed": res["best"]["value"] if res.get("best") else
        (max(completed) if completed else None),
        "attempts": sum(t.get("attempts", 0) for t in trials),
        "restarts_from_scratch": sum(t.get("restarts_from_scratch", 0) or 0 for t in trials),
        "errors": [f"trial {t['id']}: {t['error']}" for t in trials if t.get("error")
                   and t["state"] == "FAILED"],
    }
    if SEXTANT_METHODS[method][0]:
        if "fidelity_consumed" not in res:
            raise RuntimeError("sextant results has no fidelity_consumed")
        summary["epochs_total"] = float(res["fidelity_consumed"])
        summary["epochs_source"] = "fidelity_consumed"
    else:
        summary["epochs_total"] = float(len(trials) * cfg["max_epochs"])
        summary["epochs_source"] = "trials x max"
    return summary


# ------------------------------------------------------------------------------------- Optuna

def run_optuna(method, cfg, seed, n_trials, mdir, cache_dir, optuna5):
    """One study through optuna_driver.py in a process of its own (Optuna 5 for optuna5-*)."""
    config = {"pruner": OPTUNA_METHODS[method], "space": SPACE,
              "train_cmd": [PY, TRAIN, "--train-subset", str(cfg["train_subset"])],
              "max_epochs": cfg["max_epochs"], "min_epochs": cfg["min_epochs"],
              "eta": cfg["eta"], "n_trials": n_trials, "seed": seed,
              "epoch_log": os.path.join(mdir, "epochs.jsonl")}
    cmd = [PY, os.path.join(HERE, "optuna_driver.py")]
    if is_optuna5(method):
        cmd += ["--optuna5", optuna5]
    env = dict(os.environ, FASHION_MNIST_CACHE_DIR=cache_dir, OMP_NUM_THREADS="1")
    with open(os.path.join(mdir, "optuna_driver.err"), "w") as err:
        # Its own session, as for Sextant: a Ctrl-C of the benchmark reaches it once, through us.
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                             text=True, env=env, start_new_session=True)
        try:
            out, _ = p.communicate(json.dumps(config))
        except BaseException:
            p.send_signal(signal.SIGINT)
            p.wait()
            raise
    if p.returncode != 0:
        tail = open(os.path.join(mdir, "optuna_driver.err")).read()[-2000:]
        raise RuntimeError(f"optuna_driver ({method}) exited {p.returncode}:\n{tail}")
    s = json.loads(out)
    s["tool"] = "optuna"
    # Epochs actually run: every epoch train.py finished, including one that completed between
    # the pruning decision and the kill (the log has it; the driver may not have read it).
    s["epochs_total"] = float(len(read_epoch_log(os.path.join(mdir, "epochs.jsonl"))))
    s["epochs_source"] = "epochs run"
    with open(os.path.join(mdir, "results.json"), "w") as f:
        json.dump(s, f, indent=1)
    return s


# ------------------------------------------------------------------------------------- curves

def read_epoch_log(path):
    if not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                out.append(json.loads(line))
    out.sort(key=lambda r: r["t"])
    return out


def curve(records, only_epoch=None):
    """[(epochs consumed, best val_accuracy so far, seconds since the first epoch)] at each
    improvement, plus the last epoch. With only_epoch, only values reported at that epoch count
    (the best model trained to the maximum fidelity); the epochs axis still counts every epoch."""
    pts, best = [], -math.inf
    t0 = records[0]["t"] if records else 0
    for i, r in enumerate(records, 1):
        a = r["val_accuracy"]
        if only_epoch is not None and r["epoch"] != only_epoch:
            continue
        if a is not None and a > best:
            best = a
            pts.append((i, best, r["t"] - t0))
    if pts and pts[-1][0] != len(records):
        pts.append((len(records), best, records[-1]["t"] - t0))
    return pts


def best_at(pts, budget):
    """Best accuracy reached within `budget` epochs (None before the first point)."""
    b = None
    for e, a, _ in pts:
        if e <= budget + 1e-9:
            b = a
        else:
            break
    return b


def epochs_to_reach(pts, target):
    for e, a, _ in pts:
        if a >= target - 1e-12:
            return e
    return None


# ------------------------------------------------------------------------------------- report

MEASURES = {
    "any": "best val_accuracy at any epoch",
    "final": "best val_accuracy of a trial trained to the maximum epochs",
}
SEXTANT_MF = ("asha", "hyperband", "bohb", "asha-stop")
PAIRS = [("asha", "optuna-sh"), ("bohb", "optuna-hb"), ("hyperband", "optuna-hb"),
         ("asha-stop", "optuna-sh"), ("asha", "optuna5-sh"), ("bohb", "optuna5-hb"),
         ("hyperband", "optuna5-hb"), ("asha-stop", "optuna5-sh"), ("asha-tpe", "optuna-sh"),
         ("asha-tpe", "optuna5-sh")]
BEST_VS_ALL = "best of Sextant's vs best of Optuna's"
BEST_VS_5 = "best of Sextant's vs best of Optuna 5's"


def fmt(x, nd=4):
    if x is None:
        return "—"
    if nd == 0:
        return str(int(round(x)))
    return f"{x:.{nd}f}"


def total_epochs(rep, m):
    """Epochs consumed, as the benchmark counts them (see the report's Setup)."""
    return rep[m]["summary"]["epochs_total"]


def evaluate_targets(rep, measure):
    """Targets (a) and (b) for one repeat and one measure ("any" or "final")."""
    key = "curve" if measure == "any" else "curve_final"
    have = lambda m: m in rep and rep[m][key]  # noqa: E731
    out = {"a": {}, "b": {}}
    if have("random"):
        r_best, r_total = rep["random"][key][-1][1], total_epochs(rep, "random")
        out["random_best"], out["random_total"] = r_best, r_total
        for m in SEXTANT_MF:
            if m in rep:
                c = rep[m][key]
                e = epochs_to_reach(c, r_best)
                out["a"][m] = {"epochs_to_reach": e, "limit": r_total / 3,
                               "met": e is not None and e <= r_total / 3 + 1e-9,
                               "best_within_limit": best_at(c, r_total / 3)}
        out["a_met"] = any(out["a"].get(m, {}).get("met") for m in ("asha", "bohb"))

    def compare(sext, opt):
        budget = min(min(rep[m]["curve"][-1][0] for m in sext + opt if rep[m]["curve"]),
                     min(total_epochs(rep, m) for m in sext + opt))
        bs = max((best_at(rep[m][key], budget) or 0.0) for m in sext)
        bo = max((best_at(rep[m][key], budget) or 0.0) for m in opt)
        return {"budget": budget, "sextant": bs, "optuna": bo, "met": bs >= bo}

    for s, o in PAIRS:
        if s in rep and o in rep and rep[s]["curve"] and rep[o]["curve"]:
            out["b"][f"{s} vs {o}"] = compare([s], [o])
    sext = [m for m in ("asha", "hyperband", "bohb") if m in rep and rep[m]["curve"]]
    opt = [m for m in OPTUNA_METHODS if m in rep and rep[m]["curve"]]
    if sext and opt:
        out["b"][BEST_VS_ALL] = compare(sext, opt)
    opt5 = [m for m in opt if is_optuna5(m)]
    if sext and opt5:
        out["b"][BEST_VS_5] = compare(sext, opt5)
    return out


def rungs(cfg):
    out, r = [], cfg["min_epochs"]
    while r < cfg["max_epochs"]:
        out.append(r)
        r *= cfg["eta"]
    return out + [cfg["max_epochs"]]


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def budget_rows(reps, methods, cfg):
    maxe = max(rep[m]["curve"][-1][0] for rep in reps for m in methods
               if m in rep and rep[m]["curve"])
    tot = mean([total_epochs(rep, "random") for rep in reps if "random" in rep])
    cands = [cfg["max_epochs"], 2 * cfg["max_epochs"], 4 * cfg["max_epochs"], 60, 90, 120, 150,
             180, 240, 300, 360, 450, 540]
    if tot:
        cands += [tot / 3, tot / 2, tot]
    return sorted({int(b) for b in cands if 0 < b <= maxe})


def budget_table(L, reps, methods, cfg, key):
    L.append("| epochs | " + " | ".join(methods) + " |")
    L.append("|---" * (len(methods) + 1) + "|")
    for b in budget_rows(reps, methods, cfg):
        row = []
        for m in methods:
            vals = []
            for rep in reps:
                c = rep[m][key] if m in rep else []
                if m in rep and rep[m]["curve"] and b <= rep[m]["curve"][-1][0]:
                    vals.append(best_at(c, b))
                else:
                    vals.append("short")
            if "short" in vals:
                row.append("—")
            else:
                v = [x for x in vals if x is not None]
                row.append(fmt(mean(v)) if len(v) == len(vals) else
                           ("no trial yet" if not v else fmt(mean(v)) + "*"))
        L.append(f"| {b} | " + " | ".join(row) + " |")


def results_table(L, reps, methods):
    n = len(reps)
    has_cpu = any(rep[m]["summary"].get("cpu_s") is not None for rep in reps for m in methods
                  if m in rep)
    L.append("| method | trials | epochs consumed (how counted) | epochs logged | best acc., any "
             "epoch | best acc., trained to max | attempts resumed / restarted from scratch "
             "| wall |" + (" CPU |" if has_cpu else ""))
    L.append("|---" * (9 if has_cpu else 8) + "|")
    for m in methods:
        rs = [rep[m] for rep in reps if m in rep]
        if not rs:
            continue
        s0 = rs[0]["summary"]
        states = {}
        for r in rs:
            for k, v in r["summary"]["states"].items():
                states[k] = states.get(k, 0) + v
        st = ", ".join(f"{v / n:g} {k.lower()}" for k, v in sorted(states.items()))
        cpu_vals = [r["summary"].get("cpu_s") for r in rs]
        cpu = (f"{mean(cpu_vals) / 60:.1f} min" if None not in cpu_vals else "—")
        if s0["tool"] == "sextant" and SEXTANT_METHODS[m][0]:
            resumed = mean([r["summary"]["attempts"] - r["summary"]["trials"] for r in rs])
            scratch = mean([r["summary"]["restarts_from_scratch"] for r in rs])
            rsc = f"{resumed:g} / {scratch:g}"
        else:
            rsc = "—"
        L.append(
            f"| {LABEL[m]} | {mean([r['summary']['trials'] for r in rs]):g} ({st}) "
            f"| {fmt(mean([r['summary']['epochs_total'] for r in rs]), 0)} "
            f"({s0['epochs_source']}) "
            f"| {fmt(mean([r['curve'][-1][0] if r['curve'] else 0 for r in rs]), 0)} "
            f"| {fmt(mean([r['curve'][-1][1] if r['curve'] else None for r in rs]))} "
            f"| {fmt(mean([r['curve_final'][-1][1] if r['curve_final'] else None for r in rs]))} "
            f"| {rsc} | {mean([r['summary']['wall_s'] for r in rs]) / 60:.1f} min |" +
            (f" {cpu} |" if has_cpu else ""))


def targets_detail(L, tg, measure):
    L.append(f"Measure: {MEASURES[measure]}.")
    L.append("")
    if "random_best" in tg:
        L.append(f"(a) Full-fidelity random search: best {tg['random_best']:.4f} after "
                 f"{fmt(tg['random_total'], 0)} epochs; a third is "
                 f"{tg['random_total'] / 3:.0f} epochs.")
        L.append("")
        L.append("| method | epochs to reach random's best | best within a third | met |")
        L.append("|---|---|---|---|")
        for m, a in tg["a"].items():
            L.append(f"| {m} | {a['epochs_to_reach'] or 'not reached'} | "
                     f"{fmt(a['best_within_limit'])} | {'met' if a['met'] else 'not met'} |")
        L.append("")
    if tg["b"]:
        L.append("(b) At an equal epoch budget (the smaller of the totals compared):")
        L.append("")
        L.append("| comparison | budget (epochs) | Sextant | Optuna | met |")
        L.append("|---|---|---|---|---|")
        for k, b in tg["b"].items():
            L.append(f"| {k} | {fmt(b['budget'], 0)} | {fmt(b['sextant'])} | "
                     f"{fmt(b['optuna'])} | {'met' if b['met'] else 'not met'} |")
        L.append("")


def notes(L, reps, methods):
    """Facts checked on the data, for the reader."""
    mism, resumed, scratch = [], 0, 0
    read, ran = 0, 0
    for ri, rep in enumerate(reps):
        for m in methods:
            if m not in rep:
                continue
            s, c = rep[m]["summary"], rep[m]["curve"]
            logged = c[-1][0] if c else 0
            if s["tool"] == "sextant":
                if abs(s["epochs_total"] - logged) > 1e-9:
                    mism.append(f"repeat {ri + 1} {m}: {s['epochs_source']} "
                                f"{fmt(s['epochs_total'], 0)}, logged {logged}")
                if SEXTANT_METHODS[m][0]:
                    resumed += s["attempts"] - s["trials"]
                    scratch += s["restarts_from_scratch"]
            else:
                read += s.get("epochs_reported", 0)
                ran += logged
    if mism:
        L.append("- Epoch accounting: Sextant's count and train.py's log **differ**: " +
                 "; ".join(mism) + ".")
    else:
        L.append("- Epoch accounting: in every Sextant run the count used above "
                 "(`fidelity_consumed`, or trials x max epochs for random search) equals the epochs "
                 "train.py logged.")
    L.append(f"- Resumption: {resumed} promoted attempts in all, {scratch} restarted from "
             "scratch (train.py's checkpoints were found every time).")
    if ran and ran == read:
        L.append(f"- Optuna: its trials ran {ran} epochs, and the driver read every one of them "
                 "(none finished between a prune decision and the kill).")
    elif ran:
        L.append(f"- Optuna: its trials ran {ran} epochs; the driver read {read} of them (the "
                 f"other {ran - read} finished between a prune decision and the kill, and are "
                 "counted).")
    bests = [mean([rep[m]["curve"][-1][1] for rep in reps if m in rep and rep[m]["curve"]])
             for m in methods]
    bests = [b for b in bests if b is not None]
    if bests:
        p = mean(bests)
        se = math.sqrt(p * (1 - p) / 10000)
        L.append(f"- Noise: the standard error of one validation accuracy near {p:.2f} on the "
                 f"10,000 validation images is about {se:.4f}, and the methods' best accuracies "
                 f"(means over repeats) span {min(bests):.4f}-{max(bests):.4f}. A target met or "
                 "missed by less than the standard error is a tie; with "
                 f"{len(reps)} repeat{'s' if len(reps) > 1 else ''} the benchmark shows how many "
                 "epochs each method needs to get near the top, not a ranking at the third "
                 "decimal.")


def optuna5_section(L, reps, methods, cfg):
    """Issue 37's share: at each epoch budget of the tables below that every compared method
    reached in every repeat, Sextant's best scheduler (asha, hyperband, bohb; mean over repeats)
    against Optuna 5's best pruner, for both measures."""
    sext = [m for m in ("asha", "hyperband", "bohb") if m in methods]
    five = [m for m in methods if is_optuna5(m)]
    if not sext or not five:
        return
    reach = min(rep[m]["curve"][-1][0] for rep in reps for m in sext + five
                if m in rep and rep[m]["curve"])
    budgets = [b for b in budget_rows(reps, sext + five, cfg) if b <= reach]
    L.append("### Against Optuna 5 (issue 37)")
    L.append("")
    L.append("| measure | epochs | Sextant's best (mean) | Optuna 5's best (mean) | Sextant at or "
             "above |")
    L.append("|---|---|---|---|---|")
    wins, total, behind = 0, 0, []
    for measure, key in (("any", "curve"), ("final", "curve_final")):
        for b in budgets:
            def at(m):
                v = [best_at(rep[m][key], b) for rep in reps]
                return None if None in v else mean(v)
            vs = {m: at(m) for m in sext + five}
            bs = max(sext, key=lambda m: -1 if vs[m] is None else vs[m])
            bo = max(five, key=lambda m: -1 if vs[m] is None else vs[m])
            if vs[bs] is None and vs[bo] is None:
                continue   # no trial trained to the maximum yet on either side
            ok = (vs[bs] or 0) >= (vs[bo] or 0)
            wins += ok
            total += 1
            def show(m):
                return f"{m} {fmt(vs[m])}" if vs[m] is not None else "no trial at max yet"
            if not ok:
                behind.append(f"{measure} at {b} epochs ({show(bo)} vs {show(bs)})")
            L.append(f"| {measure} | {b} | {show(bs)} | {show(bo)} | {'yes' if ok else 'no'} |")
    L.append("")
    frac = wins / total if total else 0
    L.append(f"Sextant at or above Optuna 5's best on **{wins}/{total} (measure, budget) pairs "
             f"({frac:.0%}) — target 80% {'met' if frac >= 0.8 else 'not met'}**. Budgets: the "
             f"rows of the tables below up to {fmt(reach, 0)} epochs, the fewest any compared "
             "method trained in a repeat; a value is the mean over repeats, and a method with no "
             "trial trained to the maximum yet in some repeat has none (a side with none counts "
             "as 0). Optuna 5 ahead: " + ("; ".join(behind) if behind else "nowhere") + ".")
    L.append("")


def write_report(path, args, cfg, reps, env_info, wall_total, cpu_total=None):
    methods = [m for m in ALL_METHODS if any(m in r for r in reps)]
    n = len(reps)
    L = []
    L.append("# Multi-fidelity benchmark: Sextant vs Optuna on Fashion-MNIST")
    L.append("")
    L.append("Best validation accuracy reached against total training epochs consumed, for "
             "full-fidelity random search, Sextant's `asha`, `hyperband` and `bohb` schedulers, "
             "and Optuna's (3.1 and 5) `SuccessiveHalvingPruner` and `HyperbandPruner` with "
             "`TPESampler`, all "
             "driving the same trainer (`examples/fashion-mnist/train.py`, a one-hidden-layer "
             "numpy MLP) with two trials at once, one method after another.")
    L.append("")
    cmd = " ".join(["bench/multifidelity/run.sh"] + ([args.cmdline] if args.cmdline else []))
    cpu_note = (f" wall ({cpu_total / 60:.0f} CPU-minutes of trials and orchestration)"
                if cpu_total else " wall")
    L.append(f"Generated by `{cmd}` in {wall_total / 60:.1f} min{cpu_note} on {env_info}.")
    L.append("")

    # ---- targets summary
    L.append("## Targets")
    L.append("")
    L.append("| target | measure | " + " | ".join(f"repeat {i + 1}" for i in range(n)) + " |")
    L.append("|---|---|" + "---|" * n)
    for measure in ("any", "final"):
        row = []
        for rep in reps:
            a = rep["_targets"][measure]
            if "a_met" not in a:
                row.append("—")
                continue
            parts = []
            for m in ("asha", "bohb"):
                if m in a["a"]:
                    e = a["a"][m]["epochs_to_reach"]
                    parts.append(f"{m} {e if e else 'never'}")
            row.append(f"**{'met' if a['a_met'] else 'not met'}** (epochs needed: "
                       f"{', '.join(parts)}; allowed {fmt(a['random_total'] / 3, 0)})")
        L.append("| (a) Sextant asha or bohb reaches full-fidelity random search's best within "
                 f"1/3 of its epochs | {MEASURES[measure]} | " + " | ".join(row) + " |")
    for measure in ("any", "final"):
        row = []
        for rep in reps:
            b = rep["_targets"][measure]["b"].get(BEST_VS_ALL)
            if not b:
                row.append("—")
                continue
            pairs = ", ".join(f"{k}: {'≥' if v['met'] else '<'}"
                              for k, v in rep["_targets"][measure]["b"].items()
                              if k not in (BEST_VS_ALL, BEST_VS_5))
            row.append(f"**{'met' if b['met'] else 'not met'}** ({fmt(b['sextant'])} vs "
                       f"{fmt(b['optuna'])} at {fmt(b['budget'], 0)} epochs; {pairs})")
        L.append("| (b) at an equal epoch budget, Sextant's best ≥ Optuna's | "
                 f"{MEASURES[measure]} | " + " | ".join(row) + " |")
    for measure in ("any", "final"):
        row = []
        for rep in reps:
            b = rep["_targets"][measure]["b"].get(BEST_VS_5)
            row.append("—" if not b else
                       f"**{'met' if b['met'] else 'not met'}** ({fmt(b['sextant'])} vs "
                       f"{fmt(b['optuna'])} at {fmt(b['budget'], 0)} epochs)")
        if any(r != "—" for r in row):
            L.append("| (b5) at an equal epoch budget, Sextant's best ≥ Optuna 5's best | "
                     f"{MEASURES[measure]} | " + " | ".join(row) + " |")
    L.append("")
    L.append("(a): epochs from the start of each search until its curve reaches random search's "
             "final best. (b): both tools' curves cut at the same number of epochs, the smallest "
             "total among the methods compared; \"best of\" takes the best of Sextant's three "
             "schedulers and of Optuna's pruners (3.1's and 5's); the pairs compare like with "
             "like (successive halving, Hyperband). (b5): the same against Optuna 5's two "
             "pruners only. Details per repeat below.")
    L.append("")
    optuna5_section(L, reps, methods, cfg)

    # ---- main table
    L.append("## Results" + (f" (means over {n} repeats)" if n > 1 else ""))
    L.append("")
    results_table(L, reps, methods)
    L.append("")
    L.append("Best accuracy (any epoch) reached within an epoch budget" +
             (", mean over repeats" if n > 1 else "") +
             " (— = the method had not trained that many epochs):")
    L.append("")
    budget_table(L, reps, methods, cfg, "curve")
    L.append("")
    L.append("Best accuracy of a trial trained to the maximum epochs, within an epoch budget "
             "(no trial yet = none had finished):")
    L.append("")
    budget_table(L, reps, methods, cfg, "curve_final")
    L.append("")

    L.append("## Notes")
    L.append("")
    notes(L, reps, methods)
    L.append("")

    # ---- setup
    L.append("## Setup")
    L.append("")
    L.append(f"- Data: Debian `dataset-fashion-mnist`; validation = the last 10,000 images of the "
             f"training file; training = the first {cfg['train_subset']:,} of the other 50,000 "
             f"(`--train-subset {cfg['train_subset']}`: a subset, to keep the benchmark near "
             "30 minutes on two cores shared with other jobs). The test file is not used.")
    L.append(f"- Fidelity: epochs, min {cfg['min_epochs']}, max {cfg['max_epochs']}, reduction "
             f"factor {cfg['eta']} (rungs at {', '.join(str(r) for r in rungs(cfg))}). "
             "`max_concurrent` 2 everywhere (Optuna: `n_jobs=2`); `OPENBLAS_NUM_THREADS=1` per "
             "trial. Sextant pauses trials at rungs and resumes promoted ones from train.py's "
             "checkpoints (`SEXTANT_CHECKPOINT_DIR`); Optuna's pruners stop trials, which train "
             "without checkpoints until pruned (the driver reads each epoch line as it comes, "
             "`trial.report(val_accuracy, epoch)`, and on `should_prune()` kills the process).")
    space = "; ".join(
        f"`{p['name']}` " + (f"{{{', '.join(p['values'])}}}" if p["type"] == "categorical" else
                             f"{p['type']} [{p['min']:g}, {p['max']:g}]" +
                             (" log" if p["log"] else ""))
        for p in SPACE)
    L.append(f"- Search space: {space}. (`momentum` is SGD's momentum or Adam's beta1.)")
    tr = cfg["trials"]
    L.append("- Trials per search: " + ", ".join(f"{m} {tr[m]}" for m in methods) +
             ". Random search gets the most epochs; the multi-fidelity trial caps aim at about a "
             "third of them (they land where the schedules take them); comparisons at equal "
             "budgets cut the curves at the smaller total.")
    L.append("- Accuracy: each curve is the running best of `val_accuracy` over every epoch "
             "trained, in the order the epochs finished (any reported epoch is a saved model). "
             "The \"trained to max\" variant counts only values at the last epoch, the answer "
             "each tool itself returns; the any-epoch maximum also rewards lucky noise, and "
             "random search, which evaluates most epochs, gets the most draws of it (the "
             "validation accuracy's standard error is about 0.0033).")
    L.append("- Epochs consumed: Sextant's schedulers: `fidelity_consumed` from `sextant results "
             "--format json` (epochs actually trained; resumed attempts count from their "
             "checkpoint). Optuna: epochs its trials actually ran (including any finished "
             "between a prune decision and the kill). Random search: trials x max epochs. "
             "\"Epochs logged\" counts the epochs train.py appended to its log, as a cross-check; "
             "the curves' x axis is that log.")
    L.append("- Optuna: each study runs in a process of its own (`optuna_driver.py`), Optuna "
             "3.1 (Debian's) or Optuna 5 (from its source folder), with the same pruners and "
             "arguments (`SuccessiveHalvingPruner(min_resource, reduction_factor, "
             "min_early_stopping_rate=0)`, `HyperbandPruner(min_resource, max_resource, "
             "reduction_factor)`) and `TPESampler(seed)` with each version's defaults: 3.1 "
             "independent, no constant liar; 5.0 multivariate with constant liar (a running "
             "trial counts as a bad one, which keeps the two concurrent trials apart).")
    L.append("- Seeds differ per method and repeat (Sextant `search.seed`, Optuna "
             "`TPESampler(seed)`); train.py's initialisation seed is fixed. Runs with two "
             "concurrent trials are not bit-reproducible (completion order decides promotions "
             "and model updates). Wall times depend on the other jobs on the machine.")
    L.append("")

    # ---- per repeat
    for ri, rep in enumerate(reps):
        sfx = f", repeat {ri + 1}" if n > 1 else ""
        L.append(f"## Details{sfx}")
        L.append("")
        if n > 1:
            results_table(L, [rep], methods)
            L.append("")
        errs = [(m, e) for m in methods if m in rep for e in rep[m]["summary"].get("errors", [])]
        if errs:
            L.append("Failed trials:")
            L.append("")
            for m, e in errs[:10]:
                L.append(f"- {m}: {e.splitlines()[0][:200]}")
            L.append("")
        L.append("Curve points, `epochs:best` (any epoch) at each improvement and at the end:")
        L.append("")
        for m in methods:
            if m in rep:
                L.append(f"- {m}: " + " ".join(f"{e}:{a:.4f}" for e, a, _ in rep[m]["curve"]))
        L.append("")
        for measure in ("any", "final"):
            targets_detail(L, rep["_targets"][measure], measure)
    L.append("## Files")
    L.append("")
    L.append("- `curves.csv`: every curve point (repeat, method, measure, epochs, best accuracy, "
             "seconds since the search's first epoch).")
    L.append("- The work folder (`--work`) keeps each method's experiment file, epoch log, "
             "`results.json` and Sextant run directory (checkpoints removed unless `--keep`).")
    L.append("")
    text = "\n".join(L)
    if path == "-":
        print(text)
    else:
        # Keep the section written by hand (the analysis of the Optuna 5 comparison, which says
        # which run it read).
        old = open(path).read() if os.path.exists(path) else ""
        begin, end = "<!-- optuna5-analysis: begin", "<!-- optuna5-analysis: end -->"
        if begin in old and end in old:
            text += "\n\n" + old[old.index(begin):old.index(end) + len(end)] + "\n"
        with open(path, "w") as f:
            f.write(text)


def env_description(optuna5=None):
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                   if l.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or "unknown CPU"
    import numpy
    import optuna   # Debian's 3.1, for its version only; the studies run in processes of their own
    try:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip() or "unknown"
    except OSError:
        commit = "unknown"
    five = bench_env.optuna5_version(optuna5) if optuna5 else None
    return (f"{os.cpu_count()} CPUs ({cpu}), shared with other jobs (load average at start "
            f"{os.getloadavg()[0]:.1f}); numpy {numpy.__version__}, optuna {optuna.__version__}"
            + (f", {five}" if five else "") + f"; Sextant at commit {commit}")


# --------------------------------------------------------------------------------------- main

def self_check(reps, cfg):
    """--quick: the harness's own assertions. Returns a list of problems."""
    problems = []
    for rep in reps:
        for m, r in rep.items():
            if m.startswith("_"):
                continue
            s, c = r["summary"], r["curve"]
            if not c:
                problems.append(f"{m}: no epochs logged")
                continue
            if s.get("errors"):
                problems.append(f"{m}: failed trials: {s['errors'][:2]}")
            logged = c[-1][0]
            if s["tool"] == "sextant":
                if abs(s["epochs_total"] - logged) > 1e-9:
                    problems.append(f"{m}: {s['epochs_source']} {s['epochs_total']} != "
                                    f"{logged} epochs logged")
                if SEXTANT_METHODS[m][0]:
                    if s["restarts_from_scratch"]:
                        problems.append(f"{m}: {s['restarts_from_scratch']} restarts from scratch "
                                        "(train.py checkpoints should make them 0)")
                    if SEXTANT_METHODS[m][2] != "stopping" and s["attempts"] <= s["trials"]:
                        problems.append(f"{m}: no trial was ever resumed (attempts "
                                        f"{s['attempts']}, trials {s['trials']})")
                    if logged >= s["trials"] * cfg["max_epochs"]:
                        problems.append(f"{m}: no epochs saved over full fidelity")
            else:
                if s["epochs_reported"] > logged:
                    problems.append(f"{m}: read {s['epochs_reported']} epochs but {logged} "
                                    "logged")
                if s["states"].get("COMPLETE", 0) + s["states"].get("PRUNED", 0) != s["trials"]:
                    problems.append(f"{m}: trial states {s['states']}")
            if not (0.1 < c[-1][1] <= 1.0):
                problems.append(f"{m}: best accuracy {c[-1][1]} out of range")
    return problems


def check_trainer(work, cache_dir):
    """--quick: train.py's own contract. Returns a list of problems."""
    problems = []
    base = [PY, TRAIN, "--train-subset", "1000", "--optimizer", "adam", "--lr", "0.003",
            "--weight-decay", "1e-4", "--batch-size", "50"]
    env = dict(os.environ, FASHION_MNIST_CACHE_DIR=cache_dir, OPENBLAS_NUM_THREADS="1")
    for k in ("SEXTANT_FIDELITY", "SEXTANT_CHECKPOINT_DIR"):
        env.pop(k, None)

    def last_line(argv, extra_env=None):
        r = subprocess.run(argv, capture_output=True, text=True, env=dict(env, **(extra_env or {})))
        lines = [l for l in r.stdout.splitlines() if l.startswith("epoch=")]
        return r.returncode, lines, r.stderr

    rc, straight, err = last_line(base + ["--epochs", "3"])
    if rc != 0 or len(straight) != 3:
        problems.append(f"train.py --epochs 3: rc {rc}, {len(straight)} epoch lines; {err[-300:]}")
        return problems
    if not all(k in straight[-1] for k in ("train_loss=", "val_loss=", "val_accuracy=")):
        problems.append(f"train.py: epoch line lacks a metric: {straight[-1]}")
    ck = os.path.join(work, "trainer-check", "ckpt")
    shutil.rmtree(os.path.dirname(ck), ignore_errors=True)
    rc1, first, _ = last_line(base, {"SEXTANT_FIDELITY": "1", "SEXTANT_CHECKPOINT_DIR": ck})
    rc2, rest, err2 = last_line(base, {"SEXTANT_FIDELITY": "3", "SEXTANT_CHECKPOINT_DIR": ck})
    if rc1 or rc2 or len(first) != 1 or len(rest) != 2 or "resumed" not in err2:
        problems.append(f"train.py resume: rc {rc1}/{rc2}, {len(first)}+{len(rest)} epoch lines")
    elif rest[-1] != straight[-1]:
        problems.append(f"train.py resume differs from an uninterrupted run: {rest[-1]!r} vs "
                        f"{straight[-1]!r}")
    if os.path.exists(ck) and [f for f in os.listdir(ck) if f.endswith(".tmp")]:
        problems.append(f"train.py left temporary files in {ck}")
    r = subprocess.run([PY, TRAIN, "--data-dir", os.path.join(work, "no-such-data")],
                       capture_output=True, text=True, env=env)
    if r.returncode != 3 or "apt-get install dataset-fashion-mnist" not in r.stderr:
        problems.append(f"train.py without data: rc {r.returncode}, stderr {r.stderr[-200:]!r}")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", help="CMake build folder with bin/sextant and bin/sextant-worker")
    ap.add_argument("--quick", action="store_true",
                    help="self-check: 2,000 training images, max 9 epochs, a few trials per "
                    "method (about 2-4 minutes); asserts the accounting and exits 1 on a problem")
    ap.add_argument("--methods", default=",".join(DEFAULT_METHODS),
                    help=f"comma-separated, from {','.join(ALL_METHODS)}")
    ap.add_argument("--repeats", type=int, default=None, help="default 2 (1 with --quick)")
    ap.add_argument("--seed", type=int, default=1, help="base seed")
    ap.add_argument("--train-subset", type=int, default=None)
    ap.add_argument("--max-epochs", type=int, default=None)
    ap.add_argument("--trials", default=None,
                    help="per-method trial counts, e.g. random=20,asha=60")
    ap.add_argument("--work", default=None, help="scratch folder (default: a new one in /tmp)")
    ap.add_argument("--out", default=None,
                    help="report (default: bench/multifidelity/RESULTS.md; with --quick, "
                    "WORK/RESULTS.md)")
    ap.add_argument("--curves", default=None,
                    help="curve CSV (default: next to the report as curves.csv)")
    ap.add_argument("--keep", action="store_true", help="keep the trials' checkpoints")
    ap.add_argument("--optuna5", default=None,
                    help="Optuna 5 source folder, the one holding optuna/ (default "
                    "$SEXTANT_OPTUNA5, else /work/shared/peers/optuna5)")
    ap.add_argument("--report-from", default=None, metavar="WORK",
                    help="only rewrite the report and curves from a finished run's work folder")
    ap.add_argument("--cmdline", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.report_from:
        return report_from(args)
    if args.repeats is None:
        args.repeats = 1 if args.quick else 2
    cfg = json.loads(json.dumps(PROFILES["quick" if args.quick else "full"]))
    if args.train_subset:
        cfg["train_subset"] = args.train_subset
    if args.max_epochs:
        cfg["max_epochs"] = args.max_epochs
    if args.trials:
        for kv in args.trials.split(","):
            k, v = kv.split("=")
            if k not in cfg["trials"]:
                ap.error(f"--trials: unknown method {k}")
            cfg["trials"][k] = int(v)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in methods:
        if m not in ALL_METHODS:
            ap.error(f"unknown method {m!r}; choose from {', '.join(ALL_METHODS)}")
    if any(is_optuna5(m) for m in methods):
        missing = bench_env.optuna5_missing(args.optuna5)
        if missing:
            ap.error(f"{missing} (the optuna5-* methods)")
    args.optuna5 = bench_env.optuna5_path(args.optuna5)
    for b in ("sextant", "sextant-worker"):
        if not os.access(os.path.join(args.build, "bin", b), os.X_OK):
            ap.error(f"{args.build}/bin/{b} is missing; build it with: ninja -C {args.build} "
                     "sextant sextant-worker")
    work = args.work or subprocess.check_output(
        ["mktemp", "-d", "/tmp/sextant-multifidelity.XXXXXX"], text=True).strip()
    os.makedirs(work, exist_ok=True)
    out = args.out or (os.path.join(work, "RESULTS.md") if args.quick
                       else os.path.join(HERE, "RESULTS.md"))
    curves_path = args.curves or (os.path.join(os.path.dirname(os.path.abspath(out)), "curves.csv")
                                  if out != "-" else os.path.join(work, "curves.csv"))
    cache_dir = os.path.join(work, "data-cache")
    # Private copies of the binaries: a rebuild of BUILD during the run cannot swap them out
    # under the benchmark (sextant starts the sextant-worker next to itself).
    bindir = os.path.join(work, "bin")
    os.makedirs(bindir, exist_ok=True)
    for b in ("sextant", "sextant-worker"):
        shutil.copy2(os.path.join(args.build, "bin", b), os.path.join(bindir, b))
    args.build = work
    env_info = env_description(
        args.optuna5 if any(is_optuna5(m) for m in methods) else None)
    log(f"work folder {work}; methods {', '.join(methods)}; {args.repeats} repeat(s); "
        f"train subset {cfg['train_subset']}, max {cfg['max_epochs']} epochs")

    # Decode the data set once into the cache, so no trial pays for it (or races to write it).
    subprocess.run([PY, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import train; "
                    "train._load_train_file(train.DATA_DIR, sys.argv[2])",
                    os.path.dirname(TRAIN), cache_dir], check=True)

    if args.quick:
        problems = check_trainer(work, cache_dir)
        if problems:
            for p in problems:
                print(f"SELF-CHECK FAILED: {p}", file=sys.stderr)
            return 1
        log("train.py: metric lines, bit-identical resume from a checkpoint, missing-data error: ok")

    t_start = time.monotonic()
    cpu_start = children_cpu()
    reps = []
    for rep in range(args.repeats):
        by_method = {}
        for mi, m in enumerate(methods):
            mdir = os.path.join(work, f"rep{rep + 1}", m)
            if os.path.exists(mdir):
                shutil.rmtree(mdir)
            os.makedirs(mdir)
            seed = args.seed + 1000 * rep + ALL_METHODS.index(m)
            n = cfg["trials"][m]
            log(f"repeat {rep + 1}: {m} ({n} trials, seed {seed}) ...")
            cpu0 = children_cpu()
            if m in SEXTANT_METHODS:
                s = run_sextant(args.build, m, cfg, seed, n, mdir, cache_dir, args.keep)
            else:
                s = run_optuna(m, cfg, seed, n, mdir, cache_dir, args.optuna5)
            # CPU time of everything the method ran (trials, Sextant, its workers), as opposed
            # to wall time, which depends on what else the machine runs.
            s["cpu_s"] = children_cpu() - cpu0
            records = read_epoch_log(os.path.join(mdir, "epochs.jsonl"))
            c = curve(records)
            by_method[m] = {"summary": s, "curve": c,
                            "curve_final": curve(records, only_epoch=cfg["max_epochs"])}
            log(f"repeat {rep + 1}: {m}: {fmt(s['epochs_total'], 0)} epochs "
                f"({s['epochs_source']}), {c[-1][0] if c else 0} logged, best "
                f"{fmt(c[-1][1] if c else None)}, {s['wall_s']:.0f} s, states {s['states']}")
        by_method["_targets"] = {k: evaluate_targets(by_method, k) for k in MEASURES}
        reps.append(by_method)
        with open(os.path.join(work, f"rep{rep + 1}", "summary.json"), "w") as f:
            json.dump(by_method, f, indent=1)
    wall_total = time.monotonic() - t_start
    cpu_total = children_cpu() - cpu_start
    with open(os.path.join(work, "run.json"), "w") as f:
        json.dump({"cfg": cfg, "methods": methods, "repeats": args.repeats,
                   "cmdline": args.cmdline, "env": env_info, "wall_s": wall_total,
                   "cpu_s": cpu_total}, f, indent=1)
    write_outputs(args, out, curves_path, cfg, reps, methods, env_info, wall_total, cpu_total)

    if args.quick:
        problems = self_check(reps, cfg)
        if problems:
            for p in problems:
                print(f"SELF-CHECK FAILED: {p}", file=sys.stderr)
            return 1
        print("self-check passed: " + "; ".join(
            f"{m} {reps[0][m]['curve'][-1][0]} epochs best {reps[0][m]['curve'][-1][1]:.4f}"
            for m in methods), file=sys.stderr)
    return 0


def load_rep(work, rep_index, methods, cfg):
    """A finished repeat, rebuilt from its summaries and epoch logs."""
    with open(os.path.join(work, f"rep{rep_index + 1}", "summary.json")) as f:
        saved = json.load(f)
    by_method = {}
    for m in methods:
        records = read_epoch_log(os.path.join(work, f"rep{rep_index + 1}", m, "epochs.jsonl"))
        by_method[m] = {"summary": saved[m]["summary"], "curve": curve(records),
                        "curve_final": curve(records, only_epoch=cfg["max_epochs"])}
    by_method["_targets"] = {k: evaluate_targets(by_method, k) for k in MEASURES}
    return by_method


def report_from(args):
    work = args.report_from
    with open(os.path.join(work, "run.json")) as f:
        run = json.load(f)
    reps = [load_rep(work, i, run["methods"], run["cfg"]) for i in range(run["repeats"])]
    args.cmdline = run["cmdline"]
    out = args.out or os.path.join(HERE, "RESULTS.md")
    curves_path = args.curves or (os.path.join(os.path.dirname(os.path.abspath(out)), "curves.csv")
                                  if out != "-" else os.path.join(work, "curves.csv"))
    write_outputs(args, out, curves_path, run["cfg"], reps, run["methods"], run["env"],
                  run["wall_s"], run.get("cpu_s"))
    return 0


def write_outputs(args, out, curves_path, cfg, reps, methods, env_info, wall_total,
                  cpu_total=None):
    with open(curves_path, "w") as f:
        f.write("repeat,method,measure,epochs,best_val_accuracy,seconds\n")
        for ri, rep in enumerate(reps):
            for m in methods:
                for measure, key in (("any", "curve"), ("final", "curve_final")):
                    for e, a, t in rep[m][key]:
                        f.write(f"{ri + 1},{m},{measure},{e},{a:.4f},{t:.1f}\n")
    write_report(out, args, cfg, reps, env_info, wall_total, cpu_total)
    log(f"wrote {out} and {curves_path} ({wall_total / 60:.1f} min)")


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(main())
