#!/usr/bin/python3
"""Optuna 3.1's multi-objective suggestion latency, beside bench/strategies/mo_bayesian_bench.cc:
200 finished trials of ZDT1 (2 objectives) or DTLZ2 (3) in 6-D at random points (in-memory
storage), then the median wall time of one ask() over 20 asks. Each asked trial is told FAIL,
which the samplers ignore, so every ask sees the same 200 observations.

  mo_suggest_peer.py [--asks 20]
"""
import argparse
import math
import random
import statistics
import time

import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

DIMS = 6


def objectives(x, m):
    if m == 2:  # ZDT1
        g = 1 + 9 * sum(x[1:]) / (DIMS - 1)
        return [x[0], g * (1 - math.sqrt(x[0] / g))]
    g = sum((v - 0.5) ** 2 for v in x[2:])  # DTLZ2
    a, b = x[0] * math.pi / 2, x[1] * math.pi / 2
    return [(1 + g) * math.cos(a) * math.cos(b), (1 + g) * math.cos(a) * math.sin(b),
            (1 + g) * math.sin(a)]


def study_with_history(sampler, m, n=200, seed=1):
    study = optuna.create_study(directions=["minimize"] * m, sampler=sampler)
    rng = random.Random(seed)
    dists = {f"x{d}": FloatDistribution(0, 1) for d in range(DIMS)}
    for _ in range(n):
        x = [rng.random() for _ in range(DIMS)]
        study.add_trial(create_trial(params={f"x{d}": v for d, v in enumerate(x)},
                                     distributions=dists, values=objectives(x, m)))
    return study


def time_asks(study, asks):
    times = []
    for _ in range(asks):
        t0 = time.perf_counter()
        trial = study.ask()
        for d in range(DIMS):
            trial.suggest_float(f"x{d}", 0, 1)
        times.append(time.perf_counter() - t0)
        study.tell(trial, state=TrialState.FAIL)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--asks", type=int, default=20)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for m in (2, 3):
        for name, make in (("optuna TPESampler (MOTPE)", lambda: optuna.samplers.TPESampler(seed=5)),
                           ("optuna NSGAIISampler", lambda: optuna.samplers.NSGAIISampler(seed=5))):
            median = time_asks(study_with_history(make(), m), args.asks)
            print(f"{name}\t{m} objectives\t200 observations\tmedian ask {median * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
