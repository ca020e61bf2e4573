#!/usr/bin/env python3
"""The Branin function (minimum 0.397887), reported the way any training script would:
a few progress lines with `step=... loss=...`, ending at the true value."""
import argparse
import math
import time

parser = argparse.ArgumentParser()
parser.add_argument("--x0", type=float, required=True)
parser.add_argument("--x1", type=float, required=True)
parser.add_argument("--steps", type=int, default=3)
args = parser.parse_args()

a, b, c = 1.0, 5.1 / (4 * math.pi ** 2), 5 / math.pi
r, s, t = 6.0, 10.0, 1 / (8 * math.pi)
value = a * (args.x1 - b * args.x0 ** 2 + c * args.x0 - r) ** 2 + s * (1 - t) * math.cos(args.x0) + s

for step in range(1, args.steps + 1):
    time.sleep(0.05)
    # The estimate sharpens with each step, as a training loss would settle.
    print(f"step={step} loss={value * (1 + 1.0 / step ** 2):.6f}", flush=True)
print(f"step={args.steps + 1} loss={value:.6f}", flush=True)
