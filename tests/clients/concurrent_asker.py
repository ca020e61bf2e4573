"""One of several clients asking the same live run at once (python_client_test): asks and tells
until the run ends, holding each trial briefly, and writes what it got as JSON lines.
usage: concurrent_asker.py RUN_DIR OUT.jsonl"""
import json
import sys
import time

import sextant

run_dir, out = sys.argv[1], sys.argv[2]
with sextant.open_run(run_dir) as study, open(out, "w") as f:
    while (trial := study.ask()) is not None:
        f.write(json.dumps({"id": trial.id, "attempt": trial.attempt, "params": trial.params}) + "\n")
        f.flush()
        time.sleep(0.02)  # "trains", so that the other asker gets its turn
        study.tell(trial, loss=trial.params["x0"] + trial.params["x1"])
