"""What the Python benchmarks share: their log line, durations, the machine and versions they
record beside each table (bench/hpo/hpo_bench.py, bench/multiobjective/mo_bench.py), and the one
way to import Optuna 5 from its source folder beside Debian's Optuna 3.1 (import_optuna)."""
import importlib
import os
import platform
import subprocess
import sys

PY = "/usr/bin/python3"   # Debian's python with python3-optuna 3.1, not a pyenv one on PATH
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Optuna 5 is not a Debian package: its source folder (the one holding optuna/) is put first on
# sys.path of a process of its own, as Optuna 3.1 and 5 cannot share one Python process.
OPTUNA5_ENV = "SEXTANT_OPTUNA5"
OPTUNA5_DEFAULT = "/work/shared/peers/optuna5"


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def fmt_s(s):
    s = int(round(s))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def versions():
    """The Sextant commit (and whether strategies/ or orchestrator/ had uncommitted changes) and
    the Optuna, numpy and Python versions of Debian's python."""
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "strategies",
                            "orchestrator"], capture_output=True, text=True).stdout.strip()
    peer = subprocess.run([PY, "-c", "import optuna, numpy, sys; print(optuna.__version__, "
                           "numpy.__version__, sys.version.split()[0])"],
                          capture_output=True, text=True).stdout.split()
    s = f"Sextant: the tree at commit {rev} when the run started" + (
        " (with uncommitted changes in strategies/ or orchestrator/)" if dirty else "")
    if len(peer) == 3:
        s += f"; Optuna {peer[0]} (numpy {peer[1]}, Python {peer[2]}, Debian packages)"
    return s


def optuna5_path(path=None):
    """The Optuna 5 source folder: `path`, else $SEXTANT_OPTUNA5, else OPTUNA5_DEFAULT."""
    return os.path.abspath(path or os.environ.get(OPTUNA5_ENV) or OPTUNA5_DEFAULT)


def optuna5_missing(path=None):
    """None when optuna5_path(path) holds optuna/__init__.py; else the message that says so and
    how to point the benchmarks at it."""
    folder = optuna5_path(path)
    if os.path.isfile(os.path.join(folder, "optuna", "__init__.py")):
        return None
    return (f"Optuna 5 source not found at {folder} (no optuna/__init__.py there); set "
            f"${OPTUNA5_ENV} or pass --optuna5 DIR to the folder that holds optuna/, or leave "
            "the Optuna 5 peers out of the list")


def import_optuna(five, path=None):
    """Imports and returns Optuna: Debian's 3.1 when `five` is false, else Optuna 5 from
    optuna5_path(path), put first on sys.path. Exits with a clear message when the folder is
    missing, when the other Optuna was already imported into this process, or when the module
    found is not the version asked for. Call once per process, before anything imports optuna."""
    if five:
        missing = optuna5_missing(path)
        if missing:
            sys.exit(missing)
        folder = optuna5_path(path)
        if folder not in sys.path:
            sys.path.insert(0, folder)
    loaded = sys.modules.get("optuna")
    module = loaded or importlib.import_module("optuna")
    major = module.__version__.split(".")[0]
    if (major == "5") != bool(five):
        sys.exit(f"{module.__file__} is Optuna {module.__version__}, not "
                 f"{'5' if five else '3.1'}" + (" (Optuna 3.1 and 5 cannot share one process; "
                                                "run each in a process of its own)" if loaded
                                                else ""))
    return module


def optuna5_version(path=None):
    """'Optuna 5.x (source at DIR, torch T)' for the versions line, read by Debian's python in a
    process of its own; None when the folder is missing or the import fails."""
    if optuna5_missing(path):
        return None
    folder = optuna5_path(path)
    out = subprocess.run([PY, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import optuna; "
                          "import torch; print(optuna.__version__, torch.__version__)", folder],
                         capture_output=True, text=True).stdout.split()
    if len(out) != 2:
        return None
    commit = ""
    try:
        with open(os.path.join(folder, "SOURCE.md")) as f:
            words = f.read().replace(",", " ").split()
        commit = next((" commit " + w[:10] for w in words if len(w) == 40 and
                       all(c in "0123456789abcdef" for c in w)), "")
    except OSError:
        pass
    return f"Optuna {out[0]} (source at {folder}{commit}; its GPSampler on Debian's torch {out[1]})"
