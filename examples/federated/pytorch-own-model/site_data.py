"""The example's own model and data format, shared by its scripts (PyTorch and numpy only).

A site's images are binary PGM files (P5, 8-bit greyscale, 28x28) named LABEL_NNNNN.pgm, so
that any tool can write them and nothing beyond numpy is needed to read them.
"""
import os

import numpy as np
import torch

# model_file.py beside this script is a copy of the Python client's helper
# (clients/python/sextant/model_file.py, numpy only), so this folder runs wherever it is copied;
# with the client installed (scripts/install-python-client), `from sextant import model_file`
# is the same module.
import model_file  # noqa: F401  (re-exported for the scripts)

CLASSES = 10


class SmallCnn(torch.nn.Module):
    """Two 3x3 convolutions with 2x2 max pooling, then one linear layer: 28x28 -> 10 classes."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.head = torch.nn.Linear(16 * 7 * 7, CLASSES)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.head(x.flatten(1))


def write_pgm(path, image):
    """image: a 2-D uint8 array."""
    with open(path, "wb") as f:
        f.write(b"P5\n%d %d\n255\n" % (image.shape[1], image.shape[0]))
        f.write(np.ascontiguousarray(image, dtype=np.uint8).tobytes())


def read_pgm(path):
    """A binary 8-bit PGM file as a 2-D uint8 array (header comments allowed)."""
    with open(path, "rb") as f:
        data = f.read()
    fields, at = [], 0
    while len(fields) < 4:
        while data[at:at + 1].isspace():
            at += 1
        if data[at:at + 1] == b"#":
            at = data.index(b"\n", at) + 1
            continue
        end = at
        while not data[end:end + 1].isspace():
            end += 1
        fields.append(data[at:end])
        at = end
    if fields[0] != b"P5" or int(fields[3]) > 255:
        raise ValueError(f"{path}: not an 8-bit binary PGM file")
    width, height = int(fields[1]), int(fields[2])
    pixels = np.frombuffer(data, dtype=np.uint8, count=width * height, offset=at + 1)
    return pixels.reshape(height, width)


def load_images(folder):
    """Every LABEL_*.pgm in folder as (x: float32 [n, 1, 28, 28] in [0, 1], y: int64 [n])."""
    names = sorted(n for n in os.listdir(folder) if n.endswith(".pgm"))
    if not names:
        raise SystemExit(f"no .pgm images in {folder}")
    x = np.stack([read_pgm(os.path.join(folder, n)) for n in names]).astype(np.float32) / 255
    y = np.array([int(n.split("_", 1)[0]) for n in names], dtype=np.int64)
    return torch.from_numpy(x[:, None]), torch.from_numpy(y)


def evaluate(model, x, y):
    """(mean cross-entropy, accuracy) of model on x, y."""
    model.eval()
    with torch.no_grad():
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits, y).item()
        accuracy = (logits.argmax(1) == y).float().mean().item()
    return loss, accuracy
