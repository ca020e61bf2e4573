#!/usr/bin/python3
"""The cost-aware benchmark's trial (bench/multiobjective/cost_aware.py).

    cost_problem.py WIDTH X0 X1

A stand-in for training a model of width WIDTH in [16, 1024] (log scale) with two
hyperparameters: the loss is Branin(x0, x1) (x0 in [-5, 10], x1 in [0, 15]; minimum
0.397887) plus a capacity term 2 sqrt(16 / WIDTH) that falls from 2 at width 16 to 0.25 at
width 1024, so the best loss needs the widest model, while the hyperparameters' effect is the
same at every width. The trial takes SECONDS = 3 * WIDTH / 1024 (0.047 s to 3 s, 64x) of
wall time, by sleeping, so the ledger of a run with a pool bills it in proportion; it also
prints that modelled time and its price at cpu.small on-demand in us-east-1 (0.20 USD per
hour), as `model_seconds` and `model_dollars`, the noise-free cost the benchmark reports
beside the ledger's.
"""
import math
import sys
import time

PRICE_PER_SECOND = 0.20 / 3600


def model_seconds(width):
    return 3.0 * width / 1024


def loss(width, x0, x1):
    b = (x1 - 5.1 / (4 * math.pi ** 2) * x0 ** 2 + 5 / math.pi * x0 - 6) ** 2 + \
        10 * (1 - 1 / (8 * math.pi)) * math.cos(x0) + 10
    return b + 2 * math.sqrt(16 / width)


def main(argv):
    width, x0, x1 = (float(v) for v in argv[1:4])
    s = model_seconds(width)
    time.sleep(s)
    print(f"loss={loss(width, x0, x1)!r} model_seconds={s!r} "
          f"model_dollars={s * PRICE_PER_SECOND!r}")


if __name__ == "__main__":
    main(sys.argv)
