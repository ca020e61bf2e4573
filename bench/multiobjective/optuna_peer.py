#!/usr/bin/python3
"""Optuna peer for the multi-objective benchmark (bench/multiobjective/run.sh). Run with
Debian's /usr/bin/python3 (python3-optuna 3.1).

  optuna_peer.py PROBLEM SAMPLER SEED TRIALS

One study (in-memory storage, one process, trials one after another) of TRIALS trials on
PROBLEM from problems.py, which is imported and called in-process: the objective is the same
Python function that Sextant's trial command (`problems.py PROBLEM X0 ...`) runs, without the
process spawn. Constraints (g <= 0 holds) are stored as the trial's user attribute
"constraints" and handed to the sampler through constraints_func, Optuna's documented way.
Prints one JSON object: {"trials": [{"values": [...], "constraints": [...]}, in creation
order], "wall_s", "optuna"}.

SAMPLER is one of: nsga2 (NSGAIISampler), tpe (TPESampler, multi-objective = MOTPE), random
(RandomSampler); defaults plus seed=SEED, and constraints_func where the problem has
constraints (RandomSampler takes none).
"""
import json
import os
import sys
import time
import warnings

import optuna

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import problems  # noqa: E402


def constraints_of(trial):
    return trial.user_attrs["constraints"]


def make_sampler(name, seed, constrained):
    cf = constraints_of if constrained else None
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, constraints_func=cf)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, constraints_func=cf)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    sys.exit(f"optuna_peer: unknown sampler {name} (nsga2, tpe, random)")


def run(problem, sampler, seed, trials):
    spec = problems.PROBLEMS[problem]
    constrained = spec["constraints"] > 0
    rows = []

    def objective(trial):
        x = [trial.suggest_float(f"x{i}", lo, hi) for i, (lo, hi) in enumerate(spec["bounds"])]
        f, g = spec["fn"](x)
        trial.set_user_attr("constraints", g)
        rows.append({"values": f, "constraints": g})
        return f

    study = optuna.create_study(directions=["minimize"] * spec["objectives"],
                                sampler=make_sampler(sampler, seed, constrained))
    start = time.perf_counter()
    study.optimize(objective, n_trials=trials)
    return {"trials": rows, "wall_s": time.perf_counter() - start, "optuna": optuna.__version__}


def main(argv):
    if len(argv) != 5:
        sys.exit("usage: optuna_peer.py PROBLEM SAMPLER SEED TRIALS")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore")   # ExperimentalWarning for constraints_func
    print(json.dumps(run(argv[1], argv[2], int(argv[3]), int(argv[4]))))


if __name__ == "__main__":
    main(sys.argv)
