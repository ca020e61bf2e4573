"""Writes a safetensors model of random f32 tensors, about MEGABYTES in all, in chunks (the
memory bench's starting global model).

usage: make_model.py PATH MEGABYTES [TENSORS]
"""
import json
import struct
import sys

import numpy as np


def main():
    path, megabytes = sys.argv[1], float(sys.argv[2])
    tensors = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    per = int(megabytes * 2**20 / 4 / tensors)
    header, offset = {}, 0
    for i in range(tensors):
        header["layer%d.weight" % i] = {"dtype": "F32", "shape": [per],
                                        "data_offsets": [offset, offset + 4 * per]}
        offset += 4 * per
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    rng = np.random.default_rng(1)
    chunk = 1 << 22
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _ in range(tensors):
            left = per
            while left:
                n = min(chunk, left)
                f.write(rng.standard_normal(n, dtype=np.float32).tobytes())
                left -= n
    print("%s: %d tensors of %d floats, %.1f MB" % (path, tensors, per, offset / 2**20))


if __name__ == "__main__":
    main()
