#!/usr/bin/python3
"""Writes the Optuna storages that tests/orchestrator/import/optuna_formats_test.cc imports.

Usage: make_fixtures.py OUT_DIR [--optuna5 OPTUNA_SOURCE_DIR]

Without --optuna5 it runs the Optuna that /usr/bin/python3 imports (Debian's python3-optuna
3.1) and writes OUT_DIR/optuna31.db and OUT_DIR/optuna31.log; with it, the Optuna at that
source folder (5.x) and OUT_DIR/optuna5.db and OUT_DIR/optuna5.log. Each storage holds the
same studies, once as SQLite (sqlite:///...) and once as a journal (JournalFileBackend), and
beside each one FILE.json is Optuna's own view of it, read back through study.trials: the
ground truth the import is compared with field by field. Non-finite floats in that view are
the strings "nan", "inf" and "-inf" (strict JSON has no words for them), and datetimes are
Unix seconds. Everything runs with TZ=Asia/Kolkata, so that a time read in the wrong zone
shows; the test imports under the same zone.

Regenerate the committed fixtures (from the repository root):
  /usr/bin/python3 tests/data/optuna/make_fixtures.py tests/data/optuna
  /usr/bin/python3 tests/data/optuna/make_fixtures.py tests/data/optuna \
      --optuna5 ../shared/peers/optuna5
"""
import json
import math
import os
import sys
import time
import warnings

os.environ["TZ"] = "Asia/Kolkata"
warnings.simplefilter("ignore")
time.tzset()

OUT = sys.argv[1]
if "--optuna5" in sys.argv:
    sys.path.insert(0, os.path.abspath(sys.argv[sys.argv.index("--optuna5") + 1]))

import optuna  # noqa: E402
from optuna.distributions import distribution_to_json  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.ERROR)
MAJOR = int(optuna.__version__.split(".")[0])
PREFIX = "optuna5" if "--optuna5" in sys.argv else "optuna%s" % "".join(
    optuna.__version__.split(".")[:2])


def journal(path):
    if MAJOR >= 4:
        backend = optuna.storages.journal.JournalFileBackend(path)
    else:
        backend = optuna.storages.JournalFileStorage(path)
    return optuna.storages.JournalStorage(backend)


def finite(v):
    """v with non-finite floats as strings, recursively."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, (list, tuple)):
        return [finite(x) for x in v]
    if isinstance(v, dict):
        return {k: finite(x) for k, x in v.items()}
    return v


def when(dt):
    return None if dt is None else dt.timestamp()  # naive datetimes are local time


def view(study):
    trials = []
    for t in study.trials:
        trials.append({
            "number": t.number,
            "state": t.state.name,
            "params": finite(t.params),
            "distributions": {k: json.loads(distribution_to_json(d))
                              for k, d in t.distributions.items()},
            "values": finite(t.values),
            "intermediate": [[k, finite(v)] for k, v in sorted(t.intermediate_values.items())],
            "user_attrs": finite(t.user_attrs),
            "system_attrs": finite(t.system_attrs),
            "datetime_start": when(t.datetime_start),
            "datetime_complete": when(t.datetime_complete),
        })
    return {"name": study.study_name, "directions": [d.name for d in study.directions],
            "user_attrs": finite(study.user_attrs), "system_attrs": finite(study._storage.get_study_system_attrs(study._study_id)),
            "trials": trials}


def single(t):
    """One objective over a conditional space: kind decides depth or alpha, depth >= 3 leaf."""
    kind = t.suggest_categorical("kind", ["linear", "tree"])
    if kind == "tree":
        v = t.suggest_int("depth", 1, 4)
        if v >= 3:
            v += t.suggest_float("leaf", 0.1, 1.0)
    else:
        v = t.suggest_float("alpha", 1e-3, 1.0, log=True)
    v += t.suggest_float("lr", 0, 1, step=0.25) + t.suggest_int("n", 1, 9, step=2)
    t.set_user_attr("accuracy", 0.5 + 0.01 * t.number)
    t.set_user_attr("note", "trial %d" % t.number)
    t.set_user_attr("shape", [t.number, 2])
    t.study._storage.set_trial_system_attr(t._trial_id, "host", "node-%d" % (t.number % 2))
    if t.number == 5:
        raise RuntimeError("diverged")
    return v


def curve(t):
    """Intermediate values, NaN and both infinities among them; some trials pruned."""
    q = t.suggest_float("q", 0, 1)
    for step in range(1, 6):
        v = q * step / 5 + 0.4
        if (t.number, step) == (1, 2):
            v = float("nan")
        elif (t.number, step) == (3, 3):
            v = float("inf")
        elif (t.number, step) == (4, 1):
            v = float("-inf")
        t.report(v, step)
        if t.should_prune():
            raise optuna.TrialPruned()
    return float("-inf") if t.number == 6 else q + 0.4


def two(t):
    a = t.suggest_float("a", 0, 1)
    b = t.suggest_int("b", 1, 4)
    if t.number == 5:
        return float("inf"), 0.0
    return a * b, (1 - a) * b


def write(storage):
    scratch = optuna.create_study(storage=storage, study_name="scratch")
    scratch.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)

    s = optuna.create_study(storage=storage, study_name="single", direction="minimize",
                            sampler=optuna.samplers.RandomSampler(seed=3))
    s.set_user_attr("owner", "team-a")
    s._storage.set_study_system_attr(s._study_id, "origin", {"by": "make_fixtures", "n": 1})
    if hasattr(s, "set_metric_names"):
        s.set_metric_names(["loss"])
    s.enqueue_trial({"kind": "tree", "depth": 3})
    s.optimize(single, n_trials=8, catch=(RuntimeError,))
    dists = {"kind": optuna.distributions.CategoricalDistribution(["linear", "tree"]),
             "alpha": optuna.distributions.FloatDistribution(1e-3, 1.0, log=True),
             "lr": optuna.distributions.FloatDistribution(0, 1, step=0.25),
             "n": optuna.distributions.IntDistribution(1, 9, step=2)}
    s.add_trial(optuna.trial.create_trial(
        params={"kind": "linear", "alpha": 0.01, "lr": 0.5, "n": 3}, distributions=dists,
        value=3.51, user_attrs={"accuracy": 0.9, "note": "added", "shape": [0, 0]}))
    running = s.ask()
    running.suggest_categorical("kind", ["linear", "tree"])
    running.suggest_float("alpha", 1e-3, 1.0, log=True)
    s.enqueue_trial({"kind": "linear", "alpha": 0.1, "lr": 0.25, "n": 5})

    optuna.delete_study(study_name="scratch", storage=storage)

    p = optuna.create_study(storage=storage, study_name="pruned", direction="maximize",
                            sampler=optuna.samplers.RandomSampler(seed=5),
                            pruner=optuna.pruners.ThresholdPruner(lower=0.5))
    p.optimize(curve, n_trials=8)

    m = optuna.create_study(storage=storage, study_name="multi",
                            directions=["minimize", "maximize"],
                            sampler=optuna.samplers.RandomSampler(seed=7))
    m.optimize(two, n_trials=6)
    return [s, p, m]


def main():
    for ext, make in [("db", lambda path: "sqlite:///" + path), ("log", journal)]:
        path = os.path.join(OUT, "%s.%s" % (PREFIX, ext))
        for stale in [path, path + ".json", path + ".lock"]:
            if os.path.exists(stale):
                os.remove(stale)
        storage = make(path)
        write(storage)
        # Read back through a fresh storage object: Optuna's view of the file as stored.
        storage = make(path)
        names = [st.study_name for st in optuna.get_all_study_summaries(storage)]
        studies = [view(optuna.load_study(study_name=n, storage=storage)) for n in names]
        truth = {"optuna_version": optuna.__version__, "studies": studies}
        with open(path + ".json", "w") as f:
            json.dump(truth, f, indent=1, sort_keys=True, allow_nan=False)
            f.write("\n")


main()
