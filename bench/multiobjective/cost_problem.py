#!/usr/bin/python3
"""The cost-aware benchmark's trial (bench/multiobjective/cost_aware.py).

    cost_problem.py [--problem widest|moderate] WIDTH X0 X1

A stand-in for training a model of width WIDTH in [16, 1024] (log scale) with two
hyperparameters x0 in [-5, 10] and x1 in [0, 15], whose effect is Branin(x0, x1) (minimum
0.397887) at every width. The width's effect depends on the problem:

- widest (the default): a capacity term 2 sqrt(16 / WIDTH) that falls from 2 at width 16 to
  0.25 at width 1024, so the best loss (0.647887) needs the widest, dearest model: the worst
  case for a cost-aware search.
- moderate: the same capacity term plus an overfitting term 0.25 ln(WIDTH / 16), as for a
  model trained on a fixed amount of data, whose held-out loss falls steeply with width up to
  a moderate width, is nearly flat around it and slowly worsens beyond. The width term is
  2.0 at width 16, 1.227 at 128, 1.193 at 256 (its minimum; best loss 1.591034), 1.220 at 512
  and 1.290 at 1024.

Either way the trial takes SECONDS = 3 * WIDTH / 1024 (0.047 s to 3 s, 64x) of wall time, by
sleeping, so the ledger of a run with a pool bills it in proportion; it also prints that
modelled time and its price at cpu.small on-demand in us-east-1 (0.20 USD per hour), as
`model_seconds` and `model_dollars`, the noise-free cost the benchmark reports beside the
ledger's.
"""
import math
import sys
import time

PRICE_PER_SECOND = 0.20 / 3600


def model_seconds(width):
    return 3.0 * width / 1024


# The problems' optimal losses (Branin's minimum plus the width term's).
OPTIMUM = {"widest": 0.397887 + 0.25, "moderate": 0.397887 + 0.5 + 0.25 * math.log(16)}


def loss(width, x0, x1, problem="widest"):
    b = (x1 - 5.1 / (4 * math.pi ** 2) * x0 ** 2 + 5 / math.pi * x0 - 6) ** 2 + \
        10 * (1 - 1 / (8 * math.pi)) * math.cos(x0) + 10
    capacity = 2 * math.sqrt(16 / width)
    if problem == "moderate":
        capacity += 0.25 * math.log(width / 16)
    return b + capacity


def main(argv):
    problem = "widest"
    if len(argv) > 1 and argv[1] == "--problem":
        problem = argv[2]
        argv = argv[2:]
    if problem not in OPTIMUM:
        sys.exit(f"cost_problem.py: unknown problem {problem!r}")
    width, x0, x1 = (float(v) for v in argv[1:4])
    s = model_seconds(width)
    time.sleep(s)
    print(f"loss={loss(width, x0, x1, problem)!r} model_seconds={s!r} "
          f"model_dollars={s * PRICE_PER_SECOND!r}")


if __name__ == "__main__":
    main(sys.argv)
