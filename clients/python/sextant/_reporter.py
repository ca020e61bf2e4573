"""The command-trial side: a script that a Sextant worker launched reads its parameters from the
environment and reports metrics as `name=value` lines on stdout (docs/search.md, "The metric
protocol").
"""
import json
import math
import os
import re
import sys

from sextant._errors import NotInTrialError

# What common/metric_parser.cc accepts as a metric name.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/-]{0,127}\Z")


def in_trial():
    """True inside a command trial that a Sextant worker launched (it sets SEXTANT_TRIAL_ID and
    SEXTANT_PARAMS in the trial's environment)."""
    return "SEXTANT_TRIAL_ID" in os.environ and "SEXTANT_PARAMS" in os.environ


def _require_trial(what):
    if not in_trial():
        raise NotInTrialError(
            f"sextant.{what}: not inside a trial launched by a Sextant worker (SEXTANT_TRIAL_ID "
            "and SEXTANT_PARAMS are unset); a script that asks for its own trials uses "
            "sextant.connect() or sextant.open_run() and trial.report()")


def params():
    """The trial's parameters, from SEXTANT_PARAMS: {name: float | int | str}.
    Raises NotInTrialError outside a worker-launched trial."""
    _require_trial("params")
    return json.loads(os.environ["SEXTANT_PARAMS"])


def _number_text(name, value):
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    try:
        f = float(value)  # floats, numpy scalars, 0-d tensors
    except (TypeError, ValueError):
        raise ValueError(f"sextant.report: {name}={value!r} is not a number") from None
    if isinstance(value, bool):
        raise ValueError(f"sextant.report: {name}={value!r} is not a number")
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return repr(f)  # the shortest text that reads back as the same double


def format_metrics(metrics):
    """One protocol line for metrics ({name: number}), e.g. "epoch=3 val_loss=0.412".
    Raises ValueError naming a name the worker would not parse or a value that is no number."""
    tokens = []
    for name, value in metrics.items():
        if not _NAME.match(name):
            raise ValueError(f"sextant.report: {name!r} is not a metric name "
                             "([A-Za-z_][A-Za-z0-9_.:/-]*, at most 128 characters)")
        tokens.append(f"{name}={_number_text(name, value)}")
    return " ".join(tokens)


def report(metrics=None, **more):
    """Prints one metric line for the worker that launched this trial, e.g.
    sextant.report(epoch=3, val_loss=0.412) prints "epoch=3 val_loss=0.412" and flushes stdout;
    names that are no Python identifier go in metrics={"val/loss": 0.4}. Under a scheduler the
    fidelity key (e.g. epoch) marks the step. Raises NotInTrialError outside a worker-launched
    trial and ValueError for a bad name or value."""
    _require_trial("report")
    values = dict(metrics or {}, **more)
    if not values:
        raise ValueError("sextant.report: no metrics given")
    line = format_metrics(values)
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
