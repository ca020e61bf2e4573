"""A run directory that no process holds, through the `sextant ask` and `sextant tell` commands
(each loads the run, does one operation, commits it and lets the directory go)."""
import json
import subprocess
import time

from sextant._errors import SextantError
from sextant._study import Told


def _number(v):
    return repr(float(v))  # "nan"/"inf" pass through and are refused by the run, naming the trial


def _metric_list(metrics):
    return ",".join(f"{k}={_number(v)}" for k, v in metrics.items())


class OfflineBackend:
    """Not thread-safe across processes beyond what the commands' own locking gives: each
    command takes the run directory for the length of one operation."""

    # No process serves the run, so nothing lapses while this client holds a trial: an asked
    # lease is checked against its deadline when the next command loads the run.
    keeps_leases = False

    def __init__(self, run_dir, sextant):
        self.run_dir = run_dir
        self._sextant = sextant

    def close(self):
        pass

    def _run(self, what, args):
        out = subprocess.run([self._sextant, *args], capture_output=True, text=True)
        return out.returncode, out.stdout, out.stderr.strip().removeprefix("sextant: ")

    def _fail(self, what, rc, err):
        raise SextantError(what, "COMMAND", f"{err} (exit {rc})" if err else f"exit {rc}")

    def ask(self, count, wait_seconds):
        rc, out, err = self._run("ask", ["ask", self.run_dir, "--n", str(count)])
        self.waiting = ""
        if rc == 1 and "no trial can start now" in err:
            time.sleep(min(wait_seconds, 0.5))  # another client must tell one first
            return [], False
        if rc == 1 and "no trial can start until" in err:
            # Only a tell (or a lapsed lease) frees a trial: Study.ask says which it waits for.
            self.waiting = err.strip().removeprefix("sextant: ")
            time.sleep(min(wait_seconds, 1.0))
            return [], False
        if rc != 0:
            self._fail("ask", rc, err)
        trials = []
        for line in out.splitlines():
            t = json.loads(line)
            t["trial_id"] = t.pop("trial")
            trials.append(t)
        return trials, not trials

    def report_step(self, trial, metrics, sequence):
        step = metrics.get(trial.fidelity_key, sequence)
        rc, out, err = self._run(f"report (trial {trial.id})",
                                 ["tell", self.run_dir, str(trial.id), "--attempt",
                                  str(trial.attempt), "--step", _number(step), "--metrics",
                                  _metric_list(metrics)])
        if rc != 0:
            self._fail(f"report (trial {trial.id})", rc, err)
        return out.strip()

    def touch(self, trial):
        return trial.action

    def tell(self, trial, outcome, metrics, values, error):
        what = f"tell (trial {trial.id})"
        args = ["tell", self.run_dir, str(trial.id), "--attempt", str(trial.attempt)]
        if outcome != "completed":
            args += ["--state", outcome]
        elif values:
            args += ["--values", ",".join(_number(v) for v in values)]
        if metrics:
            args += ["--metrics", _metric_list(metrics)]
        if error:
            args += ["--error", error]
        rc, out, err = self._run(what, args)
        if rc != 0:
            self._fail(what, rc, err)
        r = json.loads(out.splitlines()[-1])
        return Told(state=r["state"], already_told=r["already_told"], metrics=r["values"])
