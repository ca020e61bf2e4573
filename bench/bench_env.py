"""What the Python benchmarks share: their log line, durations, and the machine and versions
they record beside each table (bench/hpo/hpo_bench.py, bench/multiobjective/mo_bench.py)."""
import os
import platform
import subprocess
import sys

PY = "/usr/bin/python3"   # Debian's python with python3-optuna 3.1, not a pyenv one on PATH
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
