"""The Python client (clients/python/sextant) against real `sextant run` processes.

Run by ctest (tests/clients/CMakeLists.txt) with PYTHONPATH holding the built package and
SEXTANT_BIN_DIR the binaries; or by hand:
  PYTHONPATH=build/python SEXTANT_BIN_DIR=build/bin python3 -m unittest -v python_client_test
"""
import contextlib
import io
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import sextant
from live_run import LiveRun, results, sextant_binary

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable


def branin(x0, x1):
    a, b, c = 1.0, 5.1 / (4 * math.pi ** 2), 5 / math.pi
    r, s, t = 6.0, 10.0, 1 / (8 * math.pi)
    return a * (x1 - b * x0 ** 2 + c * x0 - r) ** 2 + s * (1 - t) * math.cos(x0) + s


def ask_tell_experiment(name, max_trials, sampler="random", extra_search="", max_concurrent=4):
    return f"""name: {name}
objective: {{metric: loss, goal: minimize}}
parameters:
  x0: {{type: float, min: -5, max: 10}}
  x1: {{type: float, min: 0, max: 15}}
search:
  mode: ask_tell
  sampler: {sampler}
  seed: 7
  max_trials: {max_trials}
  max_concurrent: {max_concurrent}
{extra_search}"""


class Workdir(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="pyclient-")
        self.work = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def secret(self, run):
        return os.path.join(run.dir, "secrets", "worker.secret")


class AskTellTest(Workdir):
    def test_asks_and_tells_a_search_to_completion(self):
        with LiveRun(self.work, ask_tell_experiment("complete", 12)) as run:
            told = {}
            with sextant.connect(run.address, secret_file=self.secret(run)) as study:
                # Twelve asks: the run ends with the last tell, and connect() has no run
                # directory in which to see that it then went away (open_run does; below).
                for _ in range(12):
                    trial = study.ask()
                    self.assertEqual(set(trial.params), {"x0", "x1"})
                    self.assertTrue(trial.checkpoint_dir)
                    value = branin(trial.params["x0"], trial.params["x1"])
                    result = study.tell(trial, loss=value)
                    self.assertEqual(result.state, "COMPLETED")
                    self.assertFalse(result.already_told)
                    self.assertAlmostEqual(result.metrics["loss"], value, places=12)
                    told[trial.id] = (trial, value)
                    if len(told) == 1:
                        # A second tell returns the first result unchanged.
                        again = study.tell(trial, loss=value + 100)
                        self.assertTrue(again.already_told)
                        self.assertAlmostEqual(again.metrics["loss"], value, places=12)
            self.assertEqual(run.wait(60), 0, run.output())
            r = run.results()
        self.assertEqual(len(told), 12)
        self.assertEqual(len(r["trials"]), 12)
        for t in r["trials"]:
            self.assertEqual(t["state"], "COMPLETED")
            self.assertAlmostEqual(t["value"], branin(t["params"]["x0"], t["params"]["x1"]),
                                   places=9)
            self.assertAlmostEqual(t["value"], told[t["id"]][1], places=12)
        best = min(r["trials"], key=lambda t: t["value"])
        self.assertEqual(r["best"]["trial"], best["id"])

    def test_ask_n_tell_by_values_pruned_and_failed(self):
        with LiveRun(self.work, ask_tell_experiment("states", 6, max_concurrent=6)) as run:
            with sextant.open_run(run.dir) as study:
                trials = study.ask(6)
                self.assertEqual(len(trials), 6)
                self.assertEqual(len({t.id for t in trials}), 6)
                self.assertEqual(len(study.held), 6)
                a, b, c, *rest = trials
                self.assertEqual(study.tell(a, values=[1.5]).state, "COMPLETED")
                self.assertEqual(study.tell(b, state="pruned").state, "PRUNED")
                self.assertEqual(study.tell(c, state="failed", error="diverged").state, "FAILED")
                for t in rest:
                    t.tell(loss=2.0)
                self.assertEqual(study.held, [])
                self.assertIsNone(study.ask())
            self.assertEqual(run.wait(60), 0, run.output())
            states = {t["id"]: t["state"] for t in run.results()["trials"]}
        self.assertEqual(states[a.id], "COMPLETED")
        self.assertEqual(states[b.id], "PRUNED")
        self.assertEqual(states[c.id], "FAILED")

    def test_asha_reports_pause_and_promotes_from_the_checkpoint(self):
        search = "  scheduler: asha\n  fidelity: {name: epoch, min: 1, max: 9, reduction_factor: 3}\n"
        actions, promoted = [], []
        with LiveRun(self.work, ask_tell_experiment("asha", 9, extra_search=search,
                                                    max_concurrent=3)) as run:
            with sextant.open_run(run.dir) as study:
                while (trial := study.ask()) is not None:
                    self.assertEqual(trial.fidelity_key, "epoch")
                    ckpt = os.path.join(trial.checkpoint_dir, "epoch")
                    start = 0
                    if trial.resume:
                        with open(ckpt) as f:
                            start = int(f.read())
                        promoted.append((trial.id, trial.attempt, start))
                    floor = branin(trial.params["x0"], trial.params["x1"])
                    epoch, action = start, "continue"
                    while epoch < trial.fidelity_target and action == "continue":
                        epoch += 1
                        action = trial.report(epoch=epoch, loss=floor + 1.0 / epoch)
                    actions.append(action)
                    os.makedirs(trial.checkpoint_dir, exist_ok=True)
                    with open(ckpt, "w") as f:
                        f.write(str(epoch))
                    if action == "stop":
                        study.tell(trial, state="pruned")
                    else:
                        study.tell(trial, loss=floor + 1.0 / epoch)
            self.assertEqual(run.wait(60), 0, run.output())
            r = run.results()
        self.assertIn("pause", actions)
        self.assertTrue(promoted, "no trial was promoted")
        for trial_id, attempt, start in promoted:
            self.assertGreater(attempt, 1)
            self.assertGreaterEqual(start, 1)
        # The best trial went the whole way, and its value is the one at the top rung.
        best = next(t for t in r["trials"] if t["id"] == r["best"]["trial"])
        self.assertEqual(best["fidelity"], 9)
        self.assertAlmostEqual(best["value"],
                               branin(best["params"]["x0"], best["params"]["x1"]) + 1.0 / 9,
                               places=9)

    def test_asha_stopping_mode_reports_stop(self):
        search = ("  scheduler: asha\n  asha_mode: stopping\n"
                  "  fidelity: {name: epoch, min: 1, max: 9, reduction_factor: 3}\n")
        actions = []
        with LiveRun(self.work, ask_tell_experiment("stopping", 9, extra_search=search,
                                                    max_concurrent=1)) as run:
            with sextant.open_run(run.dir) as study:
                while (trial := study.ask()) is not None:
                    floor = branin(trial.params["x0"], trial.params["x1"])
                    for epoch in range(1, 10):
                        action = trial.report(epoch=epoch, loss=floor + 1.0 / epoch)
                        if action != "continue":
                            break
                    actions.append(action)
                    if action == "stop":
                        study.tell(trial, state="pruned")
                    else:
                        study.tell(trial, loss=floor + 1.0 / epoch)
            self.assertEqual(run.wait(60), 0, run.output())
            states = [t["state"] for t in run.results()["trials"]]
        self.assertIn("stop", actions)
        self.assertEqual(states.count("PRUNED"), actions.count("stop"))

    def test_two_concurrent_askers_get_no_duplicates(self):
        asker = os.path.join(HERE, "concurrent_asker.py")
        with LiveRun(self.work, ask_tell_experiment("two-askers", 40, sampler="sobol",
                                                    max_concurrent=4)) as run:
            outs = [os.path.join(self.work, f"asker-{i}.jsonl") for i in range(2)]
            procs = [subprocess.Popen([PY, asker, run.dir, out]) for out in outs]
            for p in procs:
                self.assertEqual(p.wait(120), 0)
            self.assertEqual(run.wait(60), 0, run.output())
            r = run.results()
        got = []
        for out in outs:
            with open(out) as f:
                got.append([json.loads(line) for line in f])
        self.assertTrue(got[0] and got[1], "one asker got every trial")
        ids = [t["id"] for g in got for t in g]
        self.assertEqual(len(ids), 40)
        self.assertEqual(len(set(ids)), 40)
        configs = {(t["params"]["x0"], t["params"]["x1"]) for g in got for t in g}
        self.assertEqual(len(configs), 40)
        self.assertEqual(sorted(t["id"] for t in r["trials"] if t["state"] == "COMPLETED"),
                         sorted(ids))

    def test_an_ask_only_a_tell_can_answer_says_which_trial_it_waits_for(self):
        exp = ask_tell_experiment("held", 1, extra_search="  lease: 10m\n")
        with LiveRun(self.work, exp) as run:
            with sextant.open_run(run.dir) as first, sextant.open_run(run.dir) as second:
                held = first.ask()
                start = time.monotonic()
                err = io.StringIO()
                with contextlib.redirect_stderr(err):
                    with self.assertRaises(TimeoutError) as caught:
                        second.ask(timeout=3)
                self.assertLess(time.monotonic() - start, 10)  # not the 10-minute lease
                self.assertIn(f"waiting for trial {held.id} (its lease ends in 10 min)",
                              str(caught.exception))
                self.assertEqual(err.getvalue().count("asked and not told"), 1)  # said once
                first.tell(held, loss=0.5)
            self.assertEqual(run.wait(60), 0, run.output())

    def test_keep_alive_holds_a_trial_past_its_lease_and_a_dropped_one_is_requeued(self):
        exp = ask_tell_experiment("lease", 3, extra_search="  lease: 2s\n")
        with LiveRun(self.work, exp) as run:
            with sextant.open_run(run.dir) as study:
                held = study.ask()
                # Another client asks one and goes away without telling it.
                dropped = sextant.open_run(run.dir)
                lost = dropped.ask()
                dropped.close()
                time.sleep(6)  # three leases: only the keep-alive holds `held`
                self.assertIsNone(held.lost)
                self.assertEqual(study.tell(held, loss=1.0).state, "COMPLETED")
                # The dropped trial came back as its next attempt, with the same parameters.
                again = study.ask(timeout=30)
                while again.id != lost.id:
                    study.tell(again, loss=2.0)
                    again = study.ask(timeout=30)
                self.assertEqual(again.attempt, lost.attempt + 1)
                self.assertEqual(again.params, lost.params)
                with self.assertRaises(sextant.SextantError) as e:
                    study.tell(lost, loss=3.0)  # the lapsed attempt no longer holds it
                self.assertEqual(e.exception.code, "ABORTED")
                study.tell(again, loss=3.0)
                while (t := study.ask()) is not None:
                    study.tell(t, loss=4.0)
            self.assertEqual(run.wait(60), 0, run.output())

    def test_errors_carry_the_servers_message(self):
        with LiveRun(self.work, ask_tell_experiment("errors", 4)) as run:
            with sextant.open_run(run.dir) as study:
                trial = study.ask()
                unknown = sextant.Trial(study, {"trial_id": 9999, "attempt": 1, "params": {},
                                                "run_id": trial.run_id})
                with self.assertRaises(sextant.SextantError) as e:
                    study.tell(unknown, loss=1.0)
                self.assertEqual(e.exception.code, "NOT_FOUND")
                self.assertIn("9999", e.exception.message)
                self.assertIn("9999", str(e.exception))
                with self.assertRaises(sextant.SextantError) as e:
                    study.tell(trial, loss=float("nan"))
                self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
                self.assertIn(str(trial.id), e.exception.message)
                other = sextant.Trial(study, {"trial_id": trial.id, "attempt": trial.attempt,
                                              "params": {}, "run_id": "another-run"})
                with self.assertRaises(sextant.SextantError) as e:
                    study.tell(other, loss=1.0)
                self.assertEqual(e.exception.code, "INVALID_ARGUMENT")
                # Nothing was stored for the refused tells: the trial is still open.
                self.assertEqual(study.tell(trial, loss=1.0).already_told, False)
                with self.assertRaises(ValueError):
                    study.tell(trial, state="done")
                with self.assertRaises(ValueError):
                    trial.report(loss="low")
            run.stop()
        # A run that is not there: the dial is retried, then refused with gRPC's reason.
        study = sextant.connect("127.0.0.1:1", retry_seconds=0.5)
        with self.assertRaises(sextant.SextantError) as e:
            study.ask()
        self.assertEqual(e.exception.code, "UNAVAILABLE")
        study.close()

    def test_connect_without_the_secret_is_refused_naming_the_fix(self):
        with LiveRun(self.work, ask_tell_experiment("no-secret", 2)) as run:
            # As a newcomer first wrote it: the address alone, no credentials.
            with sextant.connect(run.address, tls_dir=None, retry_seconds=0.5) as plain:
                with self.assertRaises(sextant.SextantError) as e:
                    plain.ask(timeout=1)
            self.assertEqual(e.exception.code, "UNAUTHENTICATED")
            self.assertIn("missing bearer token", e.exception.message)
            self.assertIn("secret_file=RUN_DIR/secrets/worker.secret", str(e.exception))
            self.assertIn("sextant.open_run(RUN_DIR)", str(e.exception))
            # Another run's secret is named as the wrong one.
            wrong = os.path.join(self.work, "other.secret")
            with open(wrong, "w") as f:
                f.write("not-this-runs-secret\n")
            with sextant.connect(run.address, secret_file=wrong, retry_seconds=0.5) as other:
                with self.assertRaises(sextant.SextantError) as e:
                    other.ask(timeout=1)
            self.assertEqual(e.exception.code, "UNAUTHENTICATED")
            self.assertIn(f"{wrong} does not hold this run's secret", e.exception.message)
            # Either fix the message names works.
            with sextant.connect(run.address, secret_file=self.secret(run)) as study:
                study.tell(study.ask(), loss=1.0)
            with sextant.open_run(run.dir) as study:
                study.tell(study.ask(), loss=2.0)
            self.assertEqual(run.wait(60), 0, run.output())

    def test_tls_with_certificates_from_certs_init(self):
        certs = os.path.join(self.work, "certs")
        subprocess.run([sextant_binary(), "certs", "init", certs], check=True,
                       capture_output=True)
        with LiveRun(self.work, ask_tell_experiment("tls", 3), args=["--tls-dir", certs]) as run:
            with sextant.connect(run.address, tls_dir=certs) as study:
                for _ in range(3):
                    trial = study.ask()
                    study.tell(trial, loss=branin(trial.params["x0"], trial.params["x1"]))
            self.assertEqual(run.wait(60), 0, run.output())
            self.assertEqual([t["state"] for t in run.results()["trials"]], ["COMPLETED"] * 3)

    def test_tls_refuses_a_client_without_a_certificate(self):
        certs = os.path.join(self.work, "certs")
        subprocess.run([sextant_binary(), "certs", "init", certs], check=True,
                       capture_output=True)
        with LiveRun(self.work, ask_tell_experiment("tls-refused", 3),
                     args=["--tls-dir", certs]) as run:
            with self.assertRaises(sextant.SextantError):
                with sextant.connect(run.address, retry_seconds=0.5) as plain:
                    plain.ask(timeout=1)
            run.stop()


class RestartTest(Workdir):
    def test_a_tell_is_retried_until_the_resumed_run_takes_it(self):
        certs = os.path.join(self.work, "certs")
        subprocess.run([sextant_binary(), "certs", "init", certs], check=True,
                       capture_output=True)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            address = f"127.0.0.1:{s.getsockname()[1]}"
        flags = ["--tls-dir", certs, "--listen", address]
        run = LiveRun(self.work, ask_tell_experiment("restart", 3), args=flags).start()
        study = sextant.connect(address, tls_dir=certs)
        trial = study.ask()
        # The run dies (a crash: its asked lease is in the store) and comes back a moment later.
        os.killpg(run.proc.pid, signal.SIGKILL)
        run.proc.wait()
        resumed = []
        timer = threading.Timer(1.0, lambda: resumed.append(subprocess.Popen(
            [sextant_binary(), "resume", run.dir, *flags], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)))
        timer.start()
        try:
            told = study.tell(trial, loss=1.0)
            self.assertEqual(told.state, "COMPLETED")
            self.assertFalse(told.already_told)
            for _ in range(2):
                study.tell(study.ask(), loss=2.0)
            study.close()
            timer.join()
            self.assertEqual(resumed[0].wait(60), 0)
        finally:
            timer.cancel()
            for p in resumed:
                if p.poll() is None:
                    p.kill()
        r = results(run.dir)
        self.assertEqual([t["state"] for t in r["trials"]], ["COMPLETED"] * 3)
        self.assertEqual(next(t for t in r["trials"] if t["id"] == trial.id)["value"], 1.0)


class OfflineTest(Workdir):
    def test_open_run_drives_the_commands_when_no_process_holds_the_run(self):
        with LiveRun(self.work, ask_tell_experiment("offline", 4)) as run:
            with sextant.open_run(run.dir) as study:
                study.tell(study.ask(), loss=1.25)
            run.stop()
        with sextant.open_run(run.dir, sextant=sextant_binary()) as study:
            trials = study.ask(2)
            self.assertEqual(len(trials), 2)
            self.assertEqual(trials[0].report(loss=3.0), "continue")
            self.assertEqual(study.tell(trials[0], loss=2.5).state, "COMPLETED")
            self.assertTrue(study.tell(trials[0], loss=9.0).already_told)
            self.assertEqual(study.tell(trials[1], state="failed").state, "FAILED")
        values = {t["id"]: (t["state"], t["value"]) for t in results(run.dir)["trials"]}
        self.assertEqual(values[trials[0].id], ("COMPLETED", 2.5))
        self.assertEqual(values[trials[1].id][0], "FAILED")


class ReporterTest(Workdir):
    def test_a_command_trial_reports_with_the_client(self):
        experiment = f"""name: reporter
objective: {{metric: loss, goal: minimize}}
parameters:
  x: {{type: float, min: 0, max: 1}}
  width: {{type: int, min: 1, max: 4}}
  act: {{type: categorical, values: [relu, tanh]}}
search:
  sampler: random
  scheduler: asha
  fidelity: {{name: epoch, min: 1, max: 9, reduction_factor: 3}}
  seed: 5
  max_trials: 9
  max_concurrent: 3
trial:
  command: [{PY}, {os.path.join(HERE, "reporting_objective.py")}]
  timeout: 1m
"""
        run = LiveRun(self.work, experiment)
        run.start(wait_for_address=False)
        self.assertEqual(run.wait(120), 0, run.output())
        r = run.results()
        self.assertEqual(len(r["trials"]), 9)
        reached_top = False
        for t in r["trials"]:
            self.assertNotEqual(t["state"], "FAILED", t)
            p = t["params"]
            floor = (p["x"] - 0.3) ** 2 + 0.1 * p["width"] + (0.5 if p["act"] == "tanh" else 0)
            self.assertAlmostEqual(t["value"], floor + 1.0 / t["fidelity"], places=12)
            reached_top |= t["fidelity"] == 9
        self.assertTrue(reached_top)
        with open(os.path.join(run.dir, "logs", "trial-1.1.out")) as f:
            lines = f.read().splitlines()
        self.assertEqual(lines[0], "training epoch 1")
        self.assertRegex(lines[1], r"^epoch=1 loss=[0-9.e+-]+$")

    def test_outside_a_trial_report_and_params_raise(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SEXTANT_")}
        code = ("import sextant\n"
                "assert not sextant.in_trial()\n"
                "for f in (lambda: sextant.report(loss=1), sextant.params):\n"
                "    try:\n"
                "        f()\n"
                "    except sextant.NotInTrialError as e:\n"
                "        print(e)\n")
        out = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.count("not inside a trial launched by a Sextant worker"), 2)

    def test_report_prints_what_the_worker_parses(self):
        env = dict(os.environ, SEXTANT_TRIAL_ID="3", SEXTANT_PARAMS='{"lr":0.001,"n":4,"a":"x"}')
        code = ("import sextant\n"
                "print(sextant.params())\n"
                "sextant.report(epoch=3, val_loss=0.1 + 0.2, big=1e300, tiny=5e-324)\n"
                "sextant.report(metrics={'val/loss': float('nan'), 'up': float('inf'),"
                " 'down': float('-inf')})\n"
                "for bad in ({'1st': 1.0}, {'a b': 1.0}, {'x': 'high'}, {'x': True}):\n"
                "    try:\n"
                "        sextant.report(metrics=bad)\n"
                "    except ValueError as e:\n"
                "        print('refused', e)\n")
        out = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertEqual(lines[0], "{'lr': 0.001, 'n': 4, 'a': 'x'}")
        self.assertEqual(lines[1], "epoch=3 val_loss=0.30000000000000004 big=1e+300 tiny=5e-324")
        self.assertEqual(lines[2], "val/loss=nan up=inf down=-inf")
        self.assertEqual(sum(line.startswith("refused") for line in lines), 4)


class DocsSnippetTest(Workdir):
    def test_the_ask_tell_pages_python_snippet_runs_as_written(self):
        root = os.path.dirname(os.path.dirname(HERE))
        with open(os.path.join(root, "docs", "ask-tell.md")) as f:
            page = f.read()
        section = page[page.index("## Python client"):]
        snippet = section[section.index("```python\n") + 10:]
        snippet = snippet[:snippet.index("```")]
        exp = """name: readme
objective: {metric: val_loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search: {mode: ask_tell, sampler: random, seed: 3, max_trials: 3, max_concurrent: 1}
"""
        with LiveRun(self.work, exp) as run:
            # The snippet as docs/ask-tell.md gives it (its own stand-in for training included),
            # on this run's directory.
            code = snippet.replace('"runs/x"', repr(run.dir))
            out = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=120)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(run.wait(60), 0, run.output())
            r = run.results()
        self.assertEqual([t["state"] for t in r["trials"]], ["COMPLETED"] * 3)
        for t in r["trials"]:
            self.assertAlmostEqual(t["value"], (t["params"]["x"] - 0.3) ** 2, places=12)


class InstallTest(Workdir):
    def test_the_install_script_writes_a_package_with_the_trial_service(self):
        root = os.path.dirname(os.path.dirname(HERE))
        out = subprocess.run([os.path.join(root, "scripts", "install-python-client"), "--no-deps",
                              "--target", self.work], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn(f"installed the sextant package in {self.work}", out.stderr)
        code = ("import sextant, sextant.v1.trial_service_pb2 as pb\n"
                "print(sextant.__file__)\n"
                "print(sorted(m.name for m in pb.DESCRIPTOR.services_by_name['TrialService'].methods))\n")
        env = dict(os.environ, PYTHONPATH=self.work)
        out = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True, cwd="/")
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertEqual(lines[0], os.path.join(self.work, "sextant", "__init__.py"))
        self.assertEqual(lines[1], "['Ask', 'ReportStep', 'Tell', 'Touch']")


if __name__ == "__main__":
    unittest.main()
