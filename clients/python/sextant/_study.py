"""Study and Trial: the ask/tell layer over a live run's TrialService (sextant._live) or over the
`sextant ask` / `sextant tell` commands on a run directory that no process holds (sextant._offline).

A backend has four methods, each taking and returning plain Python values:
  ask(count, wait_seconds) -> (list of trial dicts, done)
  report_step(trial, metrics, sequence) -> action ("continue" | "stop" | "pause" | "notice")
  touch(trial) -> action
  tell(trial, outcome, metrics, values, error) -> Told
and `keeps_leases` (True when asked trials hold leases that lapse unless touched) and close().
"""
import dataclasses
import sys
import threading
import time

from sextant._errors import SextantError

OUTCOMES = ("completed", "pruned", "failed")


@dataclasses.dataclass(frozen=True)
class Told:
    """What the run stored for a tell."""
    state: str              # the trial's state as stored: "COMPLETED", "PRUNED", "FAILED", ...
    already_told: bool      # a repeated tell: the first result, unchanged
    metrics: dict           # the objective values stored


class Trial:
    """One asked trial: the lease (id, attempt) that every later call names.

    Attributes: id, attempt, params ({name: float | int | str}), checkpoint_dir, fidelity_target
    (> 0 under a scheduler: train up to this fidelity), fidelity_key (under a scheduler: the
    metric that marks the step, e.g. "epoch"), resume (a promotion or requeue: the checkpoint in
    checkpoint_dir should be there), lease_seconds, run_id, action (the run's latest word on it:
    "continue", "stop", "pause" or "notice"), lost (None, or why the run no longer holds this
    lease for us: it lapsed and the trial was requeued). Thread-safe.
    """

    def __init__(self, study, fields):
        self._study = study
        self.id = int(fields["trial_id"])
        self.attempt = int(fields["attempt"])
        self.params = dict(fields["params"])
        self.checkpoint_dir = fields.get("checkpoint_dir", "")
        self.fidelity_target = float(fields.get("fidelity_target", 0.0))
        self.resume = bool(fields.get("resume", False))
        self.lease_seconds = float(fields.get("lease_seconds", 0.0))
        self.run_id = fields.get("run_id", "")
        self.fidelity_key = fields.get("fidelity_key", "")
        self.action = "continue"
        self.lost = None
        self._sequence = 0
        self._lock = threading.Lock()
        self._last_contact = time.monotonic()

    def __repr__(self):
        return f"Trial(id={self.id}, attempt={self.attempt}, params={self.params!r})"

    def report(self, metrics=None, **more):
        """Records an intermediate result (the trial goes on), e.g. report(epoch=3, val_loss=0.4);
        under a scheduler the fidelity key marks the step. Names that are no Python identifier go
        in metrics={...}. Returns "continue"; "stop" (pruned: stop training and tell it, e.g.
        state="pruned"; it is stored PRUNED); "pause" (it reached its rung: save a checkpoint in
        checkpoint_dir and tell it its value; a promotion comes back from a later ask() as the
        same id with the next attempt, resume set and a higher fidelity_target); or "notice"
        (the run is winding down: checkpoint and tell). A retried report counts once. Raises
        SextantError with the run's message."""
        values = _metric_dict("report", metrics, more)
        with self._lock:
            self._sequence += 1
            sequence = self._sequence
        action = self._study._backend.report_step(self, values, sequence)
        self._contacted(action)
        return action

    def tell(self, values=None, *, state="completed", error="", metrics=None, **more):
        """The same as study.tell(self, ...)."""
        return self._study.tell(self, values, state=state, error=error, metrics=metrics, **more)

    def _contacted(self, action):
        self._last_contact = time.monotonic()
        if action:
            self.action = action


class Study:
    """A run seen from a client that trains by itself: ask() for trials, tell() their results.
    Made by sextant.connect() or sextant.open_run(). While a trial is held (asked and not yet
    told) a background thread touches it before its lease lapses. Thread-safe: several threads
    may ask and tell at once. Use as a context manager, or call close().
    """

    def __init__(self, backend):
        self._backend = backend
        self._held = {}  # (id, attempt) -> Trial
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._keeper = None
        self.done = False  # the run has ended: ask() returns None from then on

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Stops the keep-alive thread and closes the connection. Trials still held are not
        told: their leases lapse and the run requeues them."""
        self._stop.set()
        if self._keeper is not None:
            self._keeper.join()
        self._backend.close()

    def ask(self, n=None, *, timeout=None):
        """ask(): one Trial, waiting (long-polling the run) until one can start; None when the
        run has ended. ask(n): a list of 1 to n trials (at most 1024), or [] when the run has
        ended. timeout (seconds; default: no limit) bounds the wait: TimeoutError when it passes
        with no trial. Raises SextantError with the run's message when the run refuses."""
        count = 1 if n is None else int(n)
        if not 1 <= count <= 1024:
            raise ValueError(f"ask: n must be 1 to 1024, not {n}")
        if self.done:
            return None if n is None else []
        limit = None if timeout is None else time.monotonic() + timeout
        said = ""
        while True:
            wait = 10.0 if limit is None else max(0.0, min(10.0, limit - time.monotonic()))
            fields, done = self._backend.ask(count, wait)
            if fields:
                trials = [Trial(self, f) for f in fields]
                self._hold(trials)
                return trials[0] if n is None else trials
            if done:
                self.done = True
                return None if n is None else []
            # Never silent: when only a tell can free a trial, say which trials it waits for.
            waiting = getattr(self._backend, "waiting", "")
            if waiting and waiting != said:
                print(f"sextant: ask: {waiting}", file=sys.stderr, flush=True)
                said = waiting
            if limit is not None and time.monotonic() >= limit:
                raise TimeoutError(f"ask: no trial could start within {timeout} s"
                                   + (f": {said}" if said else ""))

    def tell(self, trial, values=None, *, state="completed", error="", metrics=None, **more):
        """Tells the run how trial ended. A completed trial carries its objective metrics by name
        (tell(trial, val_loss=0.3), or metrics={...}) or the objectives' values in the
        experiment's order (values=[0.3] or values=[0.3, 12.0]); state="pruned" or "failed" (with
        error="why") ends it otherwise. Returns Told. Idempotent: telling a trial again returns
        the first result with already_told=True (so a lost reply is retried safely). Raises
        SextantError with the run's message (an unknown or finished trial, a NaN value, ...)."""
        if state not in OUTCOMES:
            raise ValueError(f"tell: state must be one of {', '.join(OUTCOMES)}, not {state!r}")
        if not isinstance(trial, Trial):
            raise TypeError(f"tell: expected a Trial from ask(), got {type(trial).__name__}")
        if values is not None and not isinstance(values, (list, tuple)):
            values = [values]
        values = [_number("tell", "values", v) for v in values or []]
        told = self._backend.tell(trial, state, _metric_dict("tell", metrics, more), values, error)
        with self._lock:
            self._held.pop((trial.id, trial.attempt), None)
        return told

    @property
    def held(self):
        """The trials asked and not yet told, as a list."""
        with self._lock:
            return list(self._held.values())

    def _hold(self, trials):
        with self._lock:
            for t in trials:
                self._held[(t.id, t.attempt)] = t
            if self._keeper is None and self._backend.keeps_leases:
                self._keeper = threading.Thread(target=self._keep_alive, name="sextant-keepalive",
                                                daemon=True)
                self._keeper.start()

    # Touches each held trial once a third of its lease has passed since the last call naming it,
    # so a trial whose client computes for a long time between reports keeps its lease.
    def _keep_alive(self):
        while not self._stop.is_set():
            now = time.monotonic()
            due, tick = [], 1.0
            with self._lock:
                for t in self._held.values():
                    third = max(0.1, t.lease_seconds / 3) if t.lease_seconds > 0 else 10.0
                    tick = min(tick, third / 2)
                    if now - t._last_contact >= third:
                        due.append(t)
            for t in due:
                self._touch(t)
            self._stop.wait(tick)

    def _touch(self, trial):
        try:
            trial._contacted(self._backend.touch(trial))
        except SextantError as e:
            if e.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
                return  # transient: the next tick tries again
            trial.lost = e.message
            with self._lock:
                self._held.pop((trial.id, trial.attempt), None)


def _number(what, name, value):
    if isinstance(value, bool):
        raise ValueError(f"{what}: {name}={value!r} is not a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: {name}={value!r} is not a number") from None


def _metric_dict(what, metrics, more):
    out = {}
    for source in (metrics or {}, more):
        for name, value in source.items():
            out[str(name)] = _number(what, name, value)
    return out

