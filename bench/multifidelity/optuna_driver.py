"""Optuna's side of the multi-fidelity benchmark: TPESampler with HyperbandPruner or
SuccessiveHalvingPruner, driving the same examples/fashion-mnist/train.py as Sextant.

mf_bench.py runs it as a process of its own per study, so that Optuna 3.1 (Debian's) and Optuna 5
(from its source folder, bench_env.import_optuna) never share one:

  optuna_driver.py [--optuna5 DIR] < CONFIG.json      prints the study's summary as JSON

CONFIG holds run()'s keyword arguments. Both Optunas get the same pruners with the same arguments
and TPESampler(seed=seed) with their own defaults (3.1: independent, no constant liar; 5.0:
multivariate with constant liar, which matters here as two trials run at once).

Each trial runs train.py in a subprocess (its own process group) for up to the maximum number of
epochs, reads its `epoch=E ... val_accuracy=A` lines as they arrive, calls
trial.report(A, E) and, when trial.should_prune() says so, kills the process group and raises
TrialPruned. Optuna's pruners stop trials (they never pause and resume), so train.py runs without a
checkpoint folder. Two trials run at once (n_jobs=2; threads that only wait on pipes).
"""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_env  # noqa: E402

optuna = None   # set by main: Debian's 3.1, or Optuna 5 with --optuna5

LINE = re.compile(r"(?:^|[\s,])epoch=(\d+)\b.*?(?:^|[\s,])val_accuracy=([-+0-9.eEnaif]+)")


def suggest(trial, space):
    params = {}
    for p in space:
        if p["type"] == "float":
            params[p["name"]] = trial.suggest_float(p["name"], p["min"], p["max"], log=p["log"])
        elif p["type"] == "int":
            params[p["name"]] = trial.suggest_int(p["name"], p["min"], p["max"], log=p["log"])
        else:
            params[p["name"]] = trial.suggest_categorical(p["name"], p["values"])
    return params


def make_pruner(kind, min_epochs, max_epochs, eta):
    if kind == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=min_epochs, max_resource=max_epochs,
                                              reduction_factor=eta)
    if kind == "sh":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=min_epochs,
                                                      reduction_factor=eta,
                                                      min_early_stopping_rate=0)
    raise ValueError(f"unknown pruner {kind!r}")


def run(*, pruner, space, train_cmd, max_epochs, min_epochs, eta, n_trials, seed, epoch_log,
        env=None, n_jobs=2, trial_timeout=600, log=None):
    """Runs one Optuna study; returns a summary dict (trials, states, epochs read, best)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    lock = threading.Lock()
    counters = {"epochs_reported": 0, "killed": 0}
    errors = []
    child_env = dict(os.environ if env is None else env)
    child_env["OPENBLAS_NUM_THREADS"] = "1"
    child_env.pop("SEXTANT_CHECKPOINT_DIR", None)
    child_env.pop("SEXTANT_FIDELITY", None)

    def objective(trial):
        params = suggest(trial, space)
        argv = list(train_cmd) + ["--epochs", str(max_epochs), "--epoch-log", epoch_log,
                                  "--tag", f"optuna-{trial.number}"]
        for k, v in params.items():
            argv += ["--" + k.replace("_", "-"), repr(v) if isinstance(v, float) else str(v)]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=child_env, start_new_session=True, bufsize=1)
        # stderr is drained by a thread so a chatty child cannot block on a full pipe.
        err_tail = []
        t_err = threading.Thread(target=lambda: err_tail.extend(proc.stderr.readlines()[-20:]),
                                 daemon=True)
        t_err.start()
        timed_out = threading.Event()

        def on_timeout():
            timed_out.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(trial_timeout, on_timeout)
        timer.start()
        last = None
        pruned = False
        eof = False
        try:
            for line in proc.stdout:
                m = LINE.search(line)
                if not m:
                    continue
                epoch, acc = int(m.group(1)), float(m.group(2))
                with lock:
                    counters["epochs_reported"] += 1
                last = acc
                trial.report(acc, epoch)
                if trial.should_prune():
                    pruned = True
                    break
            else:
                eof = True
        finally:
            timer.cancel()
            if not eof and proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                with lock:
                    counters["killed"] += 1
            proc.stdout.close()
            rc = proc.wait()
            t_err.join(timeout=5)
            proc.stderr.close()
        if pruned:
            raise optuna.TrialPruned()
        if timed_out.is_set() or rc != 0 or last is None:
            why = f"timed out after {trial_timeout}s" if timed_out.is_set() else f"exited {rc}"
            msg = (f"trial {trial.number}: train.py {why}; "
                   f"stderr: {''.join(err_tail)[-800:]}")
            with lock:
                errors.append(msg)
            raise RuntimeError(msg)
        return last

    study = optuna.create_study(
        direction="maximize",
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=make_pruner(pruner, min_epochs, max_epochs, eta))
    t0 = time.monotonic()
    study.optimize(objective, n_trials=n_trials, n_jobs=n_jobs, catch=(RuntimeError,))
    wall = time.monotonic() - t0
    states = {}
    for t in study.trials:
        states[t.state.name] = states.get(t.state.name, 0) + 1
    try:
        best = study.best_value
    except ValueError:
        best = None
    return {"trials": len(study.trials), "states": states, "best_completed": best,
            "epochs_reported": counters["epochs_reported"], "killed": counters["killed"],
            "errors": errors, "wall_s": wall,
            "best_params": study.best_params if best is not None else None}


def main(argv):
    path, five = None, False
    if argv[1:2] == ["--optuna5"]:
        if len(argv) < 3:
            sys.exit("usage: optuna_driver.py [--optuna5 DIR] < CONFIG.json")
        path, five = argv[2], True
    elif len(argv) > 1:
        sys.exit("usage: optuna_driver.py [--optuna5 DIR] < CONFIG.json (mf_bench.py runs it; "
                 "run bench/multifidelity/run.sh)")
    global optuna
    optuna = bench_env.import_optuna(five, path)
    summary = run(**json.load(sys.stdin))
    summary["optuna"] = optuna.__version__
    print(json.dumps(summary))


if __name__ == "__main__":
    main(sys.argv)
