"""connect() to a live run by its address, or open_run() on a run directory."""
from sextant._live import LiveBackend
from sextant._study import Study


def connect(address, tls_dir=None, *, tls_name="worker", secret_file=None, retry_seconds=30.0,
            server_name=None):
    """A Study on the live run serving TrialService at address ("HOST:PORT"), which
    `sextant run` prints when it starts an ask_tell experiment.

    tls_dir: the directory from `sextant certs init` (or one holding a certificate from `sextant
    certs issue`) for a run started with --tls-dir: the client presents NAME.pem/NAME.key with
    NAME = tls_name ("worker") and sends NAME.token when it is there, as sextant-worker does.
    secret_file: a loopback run's RUN_DIR/secrets/worker.secret (open_run finds it by itself).
    retry_seconds: how long transient failures (the run restarting, a dropped connection) are
    retried before a call raises. server_name: the name to verify the server's certificate
    against when address is not one it names (it names localhost and 127.0.0.1, and any --san).
    Dialing is lazy: an unreachable address raises SextantError("UNAVAILABLE") at the first
    call, once retry_seconds have passed."""
    return Study(LiveBackend(address, tls_dir=tls_dir, tls_name=tls_name,
                             secret_file=secret_file, retry_seconds=retry_seconds,
                             server_name=server_name))


def open_run(run_dir, *, tls_dir=None, tls_name="worker", sextant=None, retry_seconds=30.0):
    """A Study on the run in run_dir: the live run when a `sextant run` or `sextant resume`
    process holds it, else the run directory itself through the `sextant ask` and `sextant tell`
    commands (sextant: the binary, by default `sextant` on PATH)."""
    raise NotImplementedError("open_run: waiting for the server's address file")
