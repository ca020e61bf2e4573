"""Sextant's Python client.

A script or notebook that trains by itself asks a run for trials and tells it their results:

    import sextant
    study = sextant.open_run("runs/x")    # the run directory `sextant run` printed
    trial = study.ask()                    # trial.params, trial.id, trial.checkpoint_dir
    for epoch in range(1, 28):
        loss = train_one_epoch(trial.params)
        if trial.report(epoch=epoch, val_loss=loss) == "stop":
            break
    study.tell(trial, val_loss=loss)       # or values=[...], or state="pruned" | "failed"

open_run reads how to dial the run (address, TLS or loopback secret) from RUN_DIR/address.
sextant.connect(ADDRESS, secret_file="runs/x/secrets/worker.secret") (or tls_dir=, for a run
with --tls-dir) dials an address instead.

A command trial that a Sextant worker launched reads its parameters and reports its metrics:

    p = sextant.params()                   # from SEXTANT_PARAMS
    sextant.report(epoch=3, val_loss=0.4)  # prints "epoch=3 val_loss=0.4" for the worker

The generated gRPC stubs are in sextant.v1 (made from proto/sextant/v1/*.proto when the package
is built or installed: scripts/install-python-client).
"""
from sextant._errors import NotInTrialError, SextantError
from sextant._reporter import in_trial, params, report
from sextant._run import connect, open_run
from sextant._study import Study, Told, Trial

__all__ = ["connect", "open_run", "Study", "Trial", "Told", "SextantError", "NotInTrialError",
           "report", "params", "in_trial"]
