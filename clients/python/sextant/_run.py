"""connect() to a live run by its address, or open_run() on a run directory."""
import json
import os
import shutil

from sextant._live import LiveBackend
from sextant._offline import OfflineBackend
from sextant._study import Study


def connect(address, tls_dir=None, *, tls_name="worker", secret_file=None, retry_seconds=60.0,
            server_name=None):
    """A Study on the live run serving TrialService at address ("HOST:PORT"), which
    `sextant run` prints when it starts an ask_tell experiment.

    tls_dir: the directory from `sextant certs init` (or one holding a certificate from `sextant
    certs issue`) for a run started with --tls-dir: the client presents NAME.pem/NAME.key with
    NAME = tls_name ("worker") and sends NAME.token when it is there, as sextant-worker does.
    secret_file: a loopback run's RUN_DIR/secrets/worker.secret (open_run finds it by itself).
    A run refuses a client with neither (SextantError "UNAUTHENTICATED", whose message names
    both fixes); open_run(RUN_DIR) is the simpler way to a run on this machine.
    retry_seconds: how long transient failures (the run restarting, a dropped connection) are
    retried before a call raises. server_name: the name to verify the server's certificate
    against when address is not one it names (it names localhost and 127.0.0.1, and any --san).
    Dialing is lazy: an unreachable address raises SextantError("UNAVAILABLE") at the first
    call, once retry_seconds have passed."""
    return Study(LiveBackend(address, tls_dir=tls_dir, tls_name=tls_name,
                             secret_file=secret_file, retry_seconds=retry_seconds,
                             server_name=server_name))


def open_run(run_dir, *, tls_dir=None, tls_name="worker", sextant=None, retry_seconds=60.0):
    """A Study on the run in run_dir. While a `sextant run` or `sextant resume` process serves
    it (its address is in RUN_DIR/address), the live run, dialed as that file says: TLS with
    the run's --tls-dir (or tls_dir, for a certificate of the client's own: tls_name), or the
    run's worker secret on loopback. Otherwise the run directory itself, through the `sextant
    ask` and `sextant tell` commands (sextant: the binary; default $SEXTANT_BIN, else `sextant`
    on PATH), which load the run for each call: slower, and a held trial is not touched.
    Raises FileNotFoundError when run_dir holds no run, or when it is offline and no binary
    is found."""
    if not os.path.exists(os.path.join(run_dir, "state.db")):
        raise FileNotFoundError(f"open_run: {run_dir} is not a Sextant run directory (no state.db)")
    live = _live_address(run_dir)
    if live is not None:
        tls = tls_dir or live.get("tls_dir") or None
        return Study(LiveBackend(live["address"], tls_dir=tls, tls_name=tls_name,
                                 secret_file=None if tls else live.get("secret_file"),
                                 retry_seconds=retry_seconds,
                                 ended=lambda: _live_address(run_dir) != live))
    binary = sextant or os.environ.get("SEXTANT_BIN") or shutil.which("sextant")
    if not binary:
        raise FileNotFoundError(f"open_run: no process serves {run_dir}, and there is no "
                                "`sextant` binary on PATH to drive it offline (pass sextant=...)")
    return Study(OfflineBackend(run_dir, binary))


def _live_address(run_dir):
    """RUN_DIR/address as a dict when the process it names is alive, else None (no live run,
    or one that died without removing the file)."""
    try:
        with open(os.path.join(run_dir, "address")) as f:
            address = json.load(f)
    except (OSError, ValueError):
        return None
    try:
        pid = int(address.get("pid", 0))
        if pid > 0:
            os.kill(pid, 0)
    except PermissionError:
        pass  # alive, another user's
    except (OSError, ValueError, TypeError):
        return None
    return address if address.get("address") else None
