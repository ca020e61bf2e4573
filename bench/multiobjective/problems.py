#!/usr/bin/python3
"""The multi-objective benchmark problems, shared by both sides of bench/multiobjective.

Every problem is minimised in every objective; a constraint value g <= 0 means it holds.
Pure Python (math only) so that one trial process starts in a few milliseconds.

As a trial command (what Sextant runs, one process per trial):
    problems.py PROBLEM X0 X1 ...      prints `f1=... f2=... [f3=...] [g1=... ...]`
    problems.py --list                 prints the problems as JSON (names, bounds, references)
As a module (what the Optuna side calls in-process):
    PROBLEMS[name]["fn"](x) -> (objectives, constraints)
"""
import json
import math
import sys


def zdt1(x):
    n = len(x)
    g = 1 + 9 * sum(x[1:]) / (n - 1)
    f1 = x[0]
    return [f1, g * (1 - math.sqrt(f1 / g))], []


def zdt2(x):
    n = len(x)
    g = 1 + 9 * sum(x[1:]) / (n - 1)
    f1 = x[0]
    return [f1, g * (1 - (f1 / g) ** 2)], []


def dtlz2_3(x):
    # M = 3 objectives; the last n - M + 1 variables are the distance variables.
    g = sum((xi - 0.5) ** 2 for xi in x[2:])
    a, b = x[0] * math.pi / 2, x[1] * math.pi / 2
    r = 1 + g
    return [r * math.cos(a) * math.cos(b), r * math.cos(a) * math.sin(b), r * math.sin(a)], []


def osy(x):
    # Osyczka and Kundu (1995): 6 variables, 2 objectives, 6 inequality constraints; the
    # feasible region is about 3-4% of the box, and the front is made of several pieces.
    x1, x2, x3, x4, x5, x6 = x
    f1 = -(25 * (x1 - 2) ** 2 + (x2 - 2) ** 2 + (x3 - 1) ** 2 + (x4 - 4) ** 2 + (x5 - 1) ** 2)
    f2 = x1 ** 2 + x2 ** 2 + x3 ** 2 + x4 ** 2 + x5 ** 2 + x6 ** 2
    g = [
        2 - x1 - x2,                    # x1 + x2 >= 2
        x1 + x2 - 6,                    # x1 + x2 <= 6
        x2 - x1 - 2,                    # x2 - x1 <= 2
        x1 - 3 * x2 - 2,                # x1 - 3 x2 <= 2
        (x3 - 3) ** 2 + x4 - 4,         # (x3 - 3)^2 + x4 <= 4
        4 - (x5 - 3) ** 2 - x6,         # (x5 - 3)^2 + x6 >= 4
    ]
    return [f1, f2], g


def bnh(x):
    # Binh and Korn (1997): 2 variables, 2 objectives, 2 constraints (most of the box feasible).
    x1, x2 = x
    f1 = 4 * x1 ** 2 + 4 * x2 ** 2
    f2 = (x1 - 5) ** 2 + (x2 - 5) ** 2
    g = [(x1 - 5) ** 2 + x2 ** 2 - 25, 7.7 - (x1 - 8) ** 2 - (x2 + 3) ** 2]
    return [f1, f2], g


def unit(n):
    return [(0.0, 1.0)] * n


# reference: the fixed hypervolume reference point (see RESULTS.md for why these values);
# hv_max: the hypervolume of the true front against it (for the "% of the optimum" column),
# None when not known in closed form.
PROBLEMS = {
    "zdt1": {"fn": zdt1, "bounds": unit(6), "objectives": 2, "constraints": 0,
             "reference": [1.1, 6.0], "hv_max": 1.1 * 6.0 - 1 / 3},
    "zdt2": {"fn": zdt2, "bounds": unit(6), "objectives": 2, "constraints": 0,
             "reference": [1.1, 6.0], "hv_max": 1.1 * 6.0 - 2 / 3},
    "dtlz2": {"fn": dtlz2_3, "bounds": unit(6), "objectives": 3, "constraints": 0,
              "reference": [1.5, 1.5, 1.5], "hv_max": 1.5 ** 3 - math.pi / 6},
    "osy": {"fn": osy, "bounds": [(0.0, 10.0), (0.0, 10.0), (1.0, 5.0), (0.0, 6.0),
                                  (1.0, 5.0), (0.0, 10.0)],
            "objectives": 2, "constraints": 6, "reference": [0.0, 80.0], "hv_max": None},
    "bnh": {"fn": bnh, "bounds": [(0.0, 5.0), (0.0, 3.0)], "objectives": 2, "constraints": 2,
            "reference": [140.0, 50.0], "hv_max": None},
}


def evaluate(name, x):
    """(objectives, constraints) of problem `name` at the point x (a list of floats)."""
    return PROBLEMS[name]["fn"](list(x))


def main(argv):
    if len(argv) == 2 and argv[1] == "--list":
        print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "fn"}
                          for k, v in PROBLEMS.items()}))
        return 0
    if len(argv) < 2 or argv[1] not in PROBLEMS:
        print(f"usage: problems.py {{{'|'.join(PROBLEMS)}}} X0 X1 ... | --list", file=sys.stderr)
        return 2
    p = PROBLEMS[argv[1]]
    x = [float(v) for v in argv[2:]]
    if len(x) != len(p["bounds"]):
        print(f"problems.py: {argv[1]} takes {len(p['bounds'])} values, got {len(x)}",
              file=sys.stderr)
        return 2
    f, g = p["fn"](x)
    tokens = [f"f{i + 1}={v!r}" for i, v in enumerate(f)] + \
             [f"g{i + 1}={v!r}" for i, v in enumerate(g)]
    print(" ".join(tokens))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
