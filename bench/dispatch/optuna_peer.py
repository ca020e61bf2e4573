#!/usr/bin/python3
"""Optuna peer for the dispatch benchmark: the same trivial subprocess trials, run the way an
Optuna user without a database server would, several processes sharing one SQLite file.

  optuna_peer.py create DB STUDY      create the study (journal_mode=WAL set once on the file)
  optuna_peer.py run DB STUDY N       load the study by name and run N trials
  optuna_peer.py check DB STUDY       print the number of COMPLETE trials

Run with Debian's /usr/bin/python3 (python3-optuna 3.1). Best setup we know for the peer:
  * SQLite in WAL mode (readers never block the writer) with synchronous=NORMAL on every
    connection (no fsync per commit; Sextant itself keeps synchronous=FULL), and a 60 s busy
    timeout so concurrent writers wait rather than fail;
  * RandomSampler (like the Sextant side; TPE's cost grows with the number of trials);
  * Optuna's logging at WARNING (no per-trial log line), no progress bar, no gc after trials.
"""
import os
import subprocess
import sys

import optuna
import sqlalchemy
from sqlalchemy import event


@event.listens_for(sqlalchemy.engine.Engine, "connect")
def _sqlite_pragmas(dbapi_connection, _record):
    cur = dbapi_connection.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


COMMAND = ["/bin/sh", "-c", "echo loss=1"]


def storage(db):
    kwargs = {"connect_args": {"timeout": 60}}
    if os.environ.get("OPTUNA_PEER_POOL", "queue") == "queue":
        # SQLAlchemy 1.4 gives file SQLite a NullPool: a new connection (open, PRAGMAs, schema
        # read) per session. A QueuePool keeps the connection; measured faster.
        kwargs["poolclass"] = sqlalchemy.pool.QueuePool
    return optuna.storages.RDBStorage(f"sqlite:///{db}", engine_kwargs=kwargs)


def objective(trial):
    trial.suggest_float("x", 0.0, 1.0)
    out = subprocess.run(COMMAND, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "loss":
            return float(value)
    raise RuntimeError("no loss reported")


def main():
    mode, db, name = sys.argv[1:4]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if mode == "create":
        optuna.create_study(study_name=name, storage=storage(db), direction="minimize")
        print(f"optuna {optuna.__version__}, sqlalchemy {sqlalchemy.__version__}, "
              f"sqlite {__import__('sqlite3').sqlite_version}")
    elif mode == "run":
        study = optuna.load_study(study_name=name, storage=storage(db),
                                  sampler=optuna.samplers.RandomSampler())
        study.optimize(objective, n_trials=int(sys.argv[4]), gc_after_trial=False,
                       show_progress_bar=False)
    elif mode == "check":
        study = optuna.load_study(study_name=name, storage=storage(db))
        trials = study.get_trials(deepcopy=False)
        complete = sum(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
        print(f"{complete} {len(trials)}")
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
