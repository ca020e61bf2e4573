#!/usr/bin/python3
"""Optuna peer for the multi-objective benchmark (bench/multiobjective/run.sh). Run with
Debian's /usr/bin/python3: python3-optuna 3.1 for the plain samplers, Optuna 5 from its source
folder (bench_env.import_optuna: --optuna5 DIR, else $SEXTANT_OPTUNA5, else
/work/shared/peers/optuna5; its GPSampler on python3-torch) for the o5-* samplers. One process
imports one Optuna.

  optuna_peer.py PROBLEM SAMPLER SEED TRIALS [--optuna5 DIR]

One study (in-memory storage, one process, trials one after another) of TRIALS trials on
PROBLEM from problems.py, which is imported and called in-process: the objective is the same
Python function that Sextant's trial command (`problems.py PROBLEM X0 ...`) runs, without the
process spawn. Constraints (g <= 0 holds) reach each sampler the way its Optuna documents:
in 3.1, stored as the trial's user attribute "constraints" and handed over through
constraints_func; in 5.0, set on the trial with trial.set_constraint("gJ", value), which every
5.0 sampler reads from the trial (5.0 deprecates constraints_func in its favour; both end in the
same trial.constraints). Prints one JSON object: {"trials": [{"values": [...], "constraints":
[...]}, in creation order], "wall_s", "optuna"}.

SAMPLER is one of (defaults plus seed=SEED; constraints as above where the problem has them):
  nsga2, tpe, random     Optuna 3.1 NSGAIISampler, TPESampler (multi-objective = MOTPE),
                         RandomSampler (which takes no constraints)
  o5-nsga2, o5-tpe,      Optuna 5 NSGAIISampler, TPESampler (5.0's defaults: constant liar;
  o5-gp, o5-random       multivariate only with one objective, so MOTPE here is independent),
                         GPSampler (one GP per objective and per constraint, logEHVI or
                         logCEHVI), RandomSampler
"""
import json
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import bench_env  # noqa: E402
sys.path.insert(0, HERE)
import problems  # noqa: E402

optuna = None   # set by main: Debian's 3.1, or Optuna 5 for the o5-* samplers
SAMPLERS = ("nsga2", "tpe", "random", "o5-nsga2", "o5-tpe", "o5-gp", "o5-random")


def constraints_of(trial):
    return trial.user_attrs["constraints"]


def make_sampler(name, seed, constrained):
    if name.startswith("o5-"):
        kind = name[3:]
        if kind == "nsga2":
            return optuna.samplers.NSGAIISampler(seed=seed)
        if kind == "tpe":
            return optuna.samplers.TPESampler(seed=seed)
        if kind == "gp":
            return optuna.samplers.GPSampler(seed=seed)
        return optuna.samplers.RandomSampler(seed=seed)
    cf = constraints_of if constrained else None
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, constraints_func=cf)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, constraints_func=cf)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    sys.exit(f"optuna_peer: unknown sampler {name} ({', '.join(SAMPLERS)})")


def run(problem, sampler, seed, trials):
    spec = problems.PROBLEMS[problem]
    constrained = spec["constraints"] > 0
    five = sampler.startswith("o5-")
    rows = []

    def objective(trial):
        x = [trial.suggest_float(f"x{i}", lo, hi) for i, (lo, hi) in enumerate(spec["bounds"])]
        f, g = spec["fn"](x)
        if five:
            for j, gj in enumerate(g):
                trial.set_constraint(f"g{j + 1}", gj)
        else:
            trial.set_user_attr("constraints", g)
        rows.append({"values": f, "constraints": g})
        return f

    study = optuna.create_study(directions=["minimize"] * spec["objectives"],
                                sampler=make_sampler(sampler, seed, constrained))
    start = time.perf_counter()
    study.optimize(objective, n_trials=trials)
    return {"trials": rows, "wall_s": time.perf_counter() - start, "optuna": optuna.__version__}


def main(argv):
    path = None
    if "--optuna5" in argv:
        i = argv.index("--optuna5")
        path = argv[i + 1] if i + 1 < len(argv) else sys.exit("optuna_peer: --optuna5 DIR")
        argv = argv[:i] + argv[i + 2:]
    if len(argv) != 5:
        sys.exit("usage: optuna_peer.py PROBLEM SAMPLER SEED TRIALS [--optuna5 DIR]")
    if argv[2] not in SAMPLERS:
        sys.exit(f"optuna_peer: unknown sampler {argv[2]} ({', '.join(SAMPLERS)})")
    global optuna
    optuna = bench_env.import_optuna(argv[2].startswith("o5-"), path)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore")   # ExperimentalWarning for constraints_func (3.1)
    print(json.dumps(run(argv[1], argv[2], int(argv[3]), int(argv[4]))))


if __name__ == "__main__":
    main(sys.argv)
