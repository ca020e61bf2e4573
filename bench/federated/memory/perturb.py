"""The memory bench's client command: writes SEXTANT_UPDATED_MODEL as SEXTANT_GLOBAL_MODEL with
small seeded noise added to every value, a chunk at a time (so the command itself holds little
of the model), and reports num_examples=1.
"""
import os
import shutil
import struct

import numpy as np


def main():
    src, dst = os.environ["SEXTANT_GLOBAL_MODEL"], os.environ["SEXTANT_UPDATED_MODEL"]
    with open(src, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
    start = 8 + n
    shutil.copyfile(src, dst)
    rng = np.random.default_rng(int(os.environ.get("SEXTANT_SEED", "0")) % 2**63)
    values = np.memmap(dst, dtype="<f4", mode="r+", offset=start)
    chunk = 1 << 22
    for begin in range(0, values.size, chunk):
        part = values[begin:begin + chunk]
        part += 1e-3 * rng.standard_normal(part.size, dtype=np.float32)
    values.flush()
    print("num_examples=1 train_loss=0")


if __name__ == "__main__":
    main()
