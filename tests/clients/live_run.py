"""Real `sextant run` processes for the Python client's tests (tests/clients) and its benchmark
(bench/asktell): start one on an experiment file, wait for its address, read its results.

SEXTANT_BIN_DIR names the directory holding `sextant` and `sextant-worker` (ctest sets it).
"""
import json
import os
import signal
import subprocess
import time

BIN_DIR = os.environ.get("SEXTANT_BIN_DIR", "")


def sextant_binary():
    path = os.path.join(BIN_DIR, "sextant")
    if not BIN_DIR or not os.access(path, os.X_OK):
        raise RuntimeError(f"SEXTANT_BIN_DIR={BIN_DIR!r} holds no sextant binary")
    return path


def results(run_dir):
    """`sextant results RUN_DIR --format json`, parsed."""
    out = subprocess.run([sextant_binary(), "results", run_dir, "--format", "json"],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"sextant results {run_dir}: exit {out.returncode}: {out.stderr}")
    return json.loads(out.stdout)


class LiveRun:
    """`sextant run FILE --run-dir DIR ARGS...` in the background, its output in DIR.out.
    For ask_tell experiments, start() waits until the run has written DIR/address."""

    def __init__(self, workdir, experiment, name="run", args=(), env=None):
        self.dir = os.path.join(workdir, name)
        self.file = os.path.join(workdir, f"{name}.yaml")
        self.log = os.path.join(workdir, f"{name}.out")
        with open(self.file, "w") as f:
            f.write(experiment)
        self._args = list(args)
        self._env = env
        self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def start(self, wait_for_address=True, timeout=60):
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sextant_binary(), "run", self.file, "--run-dir", self.dir, *self._args],
                stdout=out, stderr=subprocess.STDOUT, env=self._env, start_new_session=True)
        if wait_for_address:
            self.wait_for_address(timeout)
        return self

    @property
    def address_file(self):
        return os.path.join(self.dir, "address")

    def wait_for_address(self, timeout=60):
        limit = time.monotonic() + timeout
        while time.monotonic() < limit:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sextant run exited {self.proc.returncode}:\n{self.output()}")
            try:
                with open(self.address_file) as f:
                    text = f.read().strip()
                if text.endswith("}"):  # written whole (renamed into place), but be sure
                    return text
            except OSError:
                pass
            time.sleep(0.02)
        raise TimeoutError(f"no {self.address_file} after {timeout} s:\n{self.output()}")

    @property
    def address(self):
        """The run's TrialService address ("HOST:PORT"), from DIR/address (one JSON object)."""
        return json.loads(self.wait_for_address())["address"]

    def output(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def wait(self, timeout=60):
        """The exit status once the run ends by itself; TimeoutError (and the run stopped)
        after timeout."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise TimeoutError(f"sextant run still going after {timeout} s:\n{self.output()}")

    def stop(self):
        """Interrupts the run if it is still going (SIGINT, then SIGKILL after 20 s)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def results(self):
        return results(self.dir)
