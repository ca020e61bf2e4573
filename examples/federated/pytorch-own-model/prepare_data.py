"""Writes each site's own image files, as three hospitals or shops would each hold theirs.

Reads Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist) and writes binary PGM
files, one per image, named LABEL_NNNNN.pgm:

  sites/east-0/{train,val}/   sites/east-1/{train,val}/   sites/west-0/{train,val}/
  validation/                 the orchestrator's own held-out set (for evaluate.py)

The sites hold different amounts of data and different mixes of classes (each site has more of
some classes), so their updates weigh differently: each client reports num_examples=N, its
number of training images.

usage: prepare_data.py [--scale S]  (S multiplies every site's size; default 1)
"""
import argparse
import gzip
import os
import shutil

import numpy as np

from site_data import write_pgm

DATASET = "/usr/share/datasets/fashion-mnist"
# Training images per site, and the classes it has more of.
SITES = {"east-0": (600, [0, 1, 2, 3]), "east-1": (300, [4, 5, 6]), "west-0": (900, [7, 8, 9])}


def idx(name):
    with gzip.open(os.path.join(DATASET, name)) as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def write(folder, images, labels):
    os.makedirs(folder)
    for n, (image, label) in enumerate(zip(images, labels)):
        write_pgm(os.path.join(folder, f"{label}_{n:05d}.pgm"), image)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    images, labels = idx("train-images-idx3-ubyte.gz"), idx("train-labels-idx1-ubyte.gz")
    rng = np.random.default_rng(7)
    order = rng.permutation(len(labels))
    taken = 0
    for site, (size, favoured) in SITES.items():
        size = max(20, int(size * args.scale))
        # Half of a site's images come from its favoured classes, half from any class.
        pool = order[taken:taken + 20 * size]
        taken += 20 * size
        mine = pool[np.isin(labels[pool], favoured)][:size // 2]
        rest = pool[~np.isin(pool, mine)][:size - len(mine)]
        chosen = rng.permutation(np.concatenate([mine, rest]))
        held = max(10, len(chosen) // 5)  # a fifth held out for the site's own evaluation
        root = os.path.join(here, "sites", site)
        shutil.rmtree(root, ignore_errors=True)
        write(os.path.join(root, "val"), images[chosen[:held]], labels[chosen[:held]])
        write(os.path.join(root, "train"), images[chosen[held:]], labels[chosen[held:]])
        print(f"{root}: {len(chosen) - held} training and {held} held-out images")
    test_images, test_labels = idx("t10k-images-idx3-ubyte.gz"), idx("t10k-labels-idx1-ubyte.gz")
    n = max(100, int(1000 * args.scale))
    validation = os.path.join(here, "validation")
    shutil.rmtree(validation, ignore_errors=True)
    write(validation, test_images[:n], test_labels[:n])
    print(f"{validation}: {n} images")


if __name__ == "__main__":
    main()
