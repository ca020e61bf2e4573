"""A live run's TrialService over gRPC: credentials, retries and the proto <-> Python conversion.
"""
import os
import time

import grpc

from sextant._errors import SextantError
from sextant._study import Told
from sextant.v1 import trial_pb2
from sextant.v1 import trial_service_pb2 as pb
from sextant.v1 import trial_service_pb2_grpc as pb_grpc
from sextant.v1 import worker_service_pb2

# A transient failure: the call did not take effect and may be made again. The server answers
# UNAVAILABLE only for what can be retried, and Tell, Touch and ReportStep (keyed by its sequence)
# are idempotent, so a call whose reply was lost (DEADLINE_EXCEEDED) is retried too; Ask is not,
# since a lost reply would leave a trial leased to nobody until its lease lapsed.
_TRANSIENT = frozenset({grpc.StatusCode.UNAVAILABLE})
_TRANSIENT_IDEMPOTENT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})

_OUTCOME = {"completed": pb.TellRequest.COMPLETED, "pruned": pb.TellRequest.PRUNED,
            "failed": pb.TellRequest.FAILED}


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def credentials(tls_dir=None, tls_name="worker", secret_file=None):
    """(channel credentials or None for plaintext, call metadata) to dial a run with.

    tls_dir: a directory from `sextant certs init` (or `sextant certs issue`): TLS verifying the
    server against ca.pem, presenting NAME.pem/NAME.key (mTLS) and NAME.token as the bearer
    token when present, as sextant-worker --tls-dir does. secret_file: a loopback run's
    RUN_DIR/secrets/worker.secret, sent as the bearer token over local TCP. Neither: plaintext.
    Raises FileNotFoundError naming what is missing."""
    if tls_dir:
        ca, cert, key = (_read(os.path.join(tls_dir, f))
                         for f in ("ca.pem", f"{tls_name}.pem", f"{tls_name}.key"))
        if ca is None or cert is None or key is None:
            raise FileNotFoundError(f"{tls_dir} lacks ca.pem, {tls_name}.pem or {tls_name}.key")
        creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key,
                                             certificate_chain=cert)
        token = (_read(os.path.join(tls_dir, f"{tls_name}.token")) or b"").decode().strip()
        if token:
            creds = grpc.composite_channel_credentials(
                creds, grpc.access_token_call_credentials(token))
        return creds, ()
    if secret_file:
        secret = _read(secret_file)
        if secret is None:
            raise FileNotFoundError(f"cannot read the run's secret {secret_file}")
        # Local TCP carries no call credentials (they need a secure transport), so the bearer
        # token goes as plain metadata, which is what LoopbackChannelCredentials sends too.
        return (grpc.local_channel_credentials(grpc.LocalConnectionType.LOCAL_TCP),
                (("authorization", "Bearer " + secret.decode().strip()),))
    return None, ()


def _credentials_hint(tls_dir, secret_file):
    """What to change when the run refuses these credentials (UNAUTHENTICATED), or "" when the
    caller gave TLS credentials (the server's own message then names what is wrong)."""
    if tls_dir:
        return ""
    if secret_file:
        return (f"{secret_file} does not hold this run's secret: pass the run's own "
                "secret_file=RUN_DIR/secrets/worker.secret, or use sextant.open_run(RUN_DIR)")
    return ("a run on loopback takes its worker secret: use sextant.open_run(RUN_DIR), or "
            "sextant.connect(ADDRESS, secret_file=RUN_DIR/secrets/worker.secret) (RUN_DIR: the "
            "run directory `sextant run` printed); a run with --tls-dir takes tls_dir=")


def _params(proto_map):
    out = {}
    for name, v in proto_map.items():
        kind = v.WhichOneof("kind")
        out[name] = getattr(v, kind) if kind else None
    return out


def _action(value):
    return worker_service_pb2.TrialAction.Name(value).removeprefix("ACTION_").lower()


class LiveBackend:
    """TrialService calls with retries of transient failures for up to retry_seconds.
    ended: a callable that says whether the run has ended (open_run: its address file is gone),
    asked when an Ask finds the run unreachable. Thread-safe (a gRPC channel is)."""

    keeps_leases = True

    def __init__(self, address, tls_dir=None, tls_name="worker", secret_file=None,
                 retry_seconds=60.0, call_timeout=30.0, server_name=None, ended=None):
        creds, self._metadata = credentials(tls_dir, tls_name, secret_file)
        # gRPC's own reconnect backoff stays as it is (after a failed connection it tries
        # again after 20 s; a shorter minimum also shortens the time a TLS handshake is given,
        # and handshakes to a restarted run then failed), so a run that restarts (`sextant
        # resume`) is reached within about 20 s of its return, inside retry_seconds.
        options = [("grpc.max_receive_message_length", 16 << 20)]
        if server_name:
            options.append(("grpc.ssl_target_name_override", server_name))
        self.address = address
        self._channel = (grpc.secure_channel(address, creds, options) if creds is not None
                         else grpc.insecure_channel(address, options))
        self._stub = pb_grpc.TrialServiceStub(self._channel)
        self._retry_seconds = retry_seconds
        self._ended = ended  # () -> True once the run is known to have ended
        self._call_timeout = call_timeout
        self._hint = _credentials_hint(tls_dir, secret_file)
        self.run_id = ""

    def close(self):
        self._channel.close()

    def _call(self, what, method, request, transient, timeout, hopeless=None):
        give_up = time.monotonic() + self._retry_seconds
        delay = 0.02
        while True:
            try:
                return method(request, metadata=self._metadata, timeout=timeout)
            except grpc.RpcError as e:
                code = e.code()
                if (code in transient and time.monotonic() + delay < give_up and
                        not (hopeless and hopeless())):
                    time.sleep(delay)
                    delay = min(delay * 2, 1.0)
                    continue
                message = e.details() or str(code)
                if code == grpc.StatusCode.UNAUTHENTICATED and self._hint:
                    message = f"{message}; {self._hint}"
                raise SextantError(what, code.name if code else "UNKNOWN", message) from None

    def ask(self, count, wait_seconds):
        try:
            r = self._call("ask", self._stub.Ask,
                           pb.AskRequest(count=count, wait_seconds=wait_seconds), _TRANSIENT,
                           wait_seconds + self._call_timeout, hopeless=self._ended)
        except SextantError as e:
            # A run that ended stops serving soon after (an ask that reaches it as its server
            # shuts down is cancelled): when its address file is gone too, that is the end of
            # the search rather than a failure.
            if e.code in ("UNAVAILABLE", "CANCELLED") and self._ended is not None and self._ended():
                return [], True
            raise
        self.waiting = r.waiting if not r.trials else ""
        if self.waiting:
            # The run answered at once: only a tell (or a lapsed lease) can free a trial. Ask
            # again at a modest pace; Study.ask says why it waits.
            time.sleep(min(wait_seconds, 1.0))
        trials = []
        for t in r.trials:
            self.run_id = t.run_id or self.run_id
            trials.append({"trial_id": t.trial_id, "attempt": t.attempt,
                           "params": _params(t.params), "checkpoint_dir": t.checkpoint_dir,
                           "fidelity_target": t.fidelity_target, "resume": t.resume,
                           "lease_seconds": t.lease_seconds, "run_id": t.run_id,
                           "fidelity_key": t.fidelity_key})
        return trials, r.done

    def report_step(self, trial, metrics, sequence):
        r = self._call(f"report (trial {trial.id})", self._stub.ReportStep,
                       pb.ReportStepRequest(run_id=trial.run_id, trial_id=trial.id,
                                            attempt=trial.attempt, metrics=metrics,
                                            sequence=sequence),
                       _TRANSIENT_IDEMPOTENT, self._call_timeout)
        return _action(r.action)

    def touch(self, trial):
        r = self._call(f"touch (trial {trial.id})", self._stub.Touch,
                       pb.TouchRequest(run_id=trial.run_id, trial_id=trial.id,
                                       attempt=trial.attempt),
                       _TRANSIENT_IDEMPOTENT, self._call_timeout)
        if r.lease_seconds > 0:
            trial.lease_seconds = r.lease_seconds
        return _action(r.action)

    def tell(self, trial, outcome, metrics, values, error):
        r = self._call(f"tell (trial {trial.id})", self._stub.Tell,
                       pb.TellRequest(run_id=trial.run_id, trial_id=trial.id,
                                      attempt=trial.attempt, outcome=_OUTCOME[outcome],
                                      metrics=metrics, values=values, error=error),
                       _TRANSIENT_IDEMPOTENT, self._call_timeout)
        return Told(state=trial_pb2.TrialState.Name(r.state), already_told=r.already_told,
                    metrics=dict(r.metrics))
