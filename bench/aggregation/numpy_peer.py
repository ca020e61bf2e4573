"""Flower-style weighted averaging in numpy: the peer for bench/aggregation.

The aggregation is written the way flwr.server.strategy.aggregate.aggregate does it:
    weighted_weights = [[layer * num_examples for layer in weights] for weights, num_examples in results]
    weights_prime = [reduce(np.add, layer_updates) / num_examples_total
                     for layer_updates in zip(*weighted_weights)]
with one float32 layer per client of d parameters. Updates come from the same formula as
aggregation_bench.cc, so the checksums can be compared. Prints one key=value line.

    /usr/bin/python3 numpy_peer.py --n N --d D [--reps R]
"""
import argparse
import statistics
import time
from functools import reduce

import numpy as np


def aggregate(results):
    num_examples_total = sum(num_examples for (_, num_examples) in results)
    weighted_weights = [[layer * num_examples for layer in weights] for weights, num_examples in results]
    weights_prime = [reduce(np.add, layer_updates) / num_examples_total
                     for layer_updates in zip(*weighted_weights)]
    return weights_prime


def update(client, d):
    k = (np.arange(d, dtype=np.uint64) * np.uint64(2654435761) + np.uint64(client * 40503)) % np.uint64(65536)
    return k.astype(np.float32) / np.float32(65536.0) - np.float32(0.5)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--d", type=float, required=True)
    p.add_argument("--reps", type=int, default=5)
    a = p.parse_args()
    n, d = a.n, int(a.d)
    results = [([update(c, d)], 50 + (c * 37) % 451) for c in range(n)]
    times = []
    out = None
    for r in range(a.reps + 1):  # the first repetition warms up and is not counted
        t0 = time.perf_counter()
        out = aggregate(results)
        t1 = time.perf_counter()
        if r > 0:
            times.append(t1 - t0)
    med = statistics.median(times)
    checksum = float(np.sum(out[0], dtype=np.float64))
    print(f"bench=fedavg impl=numpy_flower n={n} d={d} reps={a.reps} median_s={med:.6f} "
          f"min_s={min(times):.6f} gbps={n * d * 4 / med / 1e9:.3f} checksum={checksum:.9e} "
          f"numpy={np.__version__}", flush=True)


if __name__ == "__main__":
    main()
