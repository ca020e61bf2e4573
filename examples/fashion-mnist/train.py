#!/usr/bin/python3
"""A small real trainer for Sextant: a one-hidden-layer MLP on Fashion-MNIST, in numpy.

Data: Debian's dataset-fashion-mnist (gzip IDX files in /usr/share/datasets/fashion-mnist/).
The last 10,000 images of the 60,000-image training file are the validation set; training uses
the first --train-subset images (default 20,000) of the remaining 50,000. The test file is not
read (it stays untouched for a final, once-only evaluation elsewhere).

Hyperparameters come from argv (--lr 0.01) or, when not given there, from Sextant's
SEXTANT_PARAM_<NAME> environment variables (SEXTANT_PARAM_LR=0.01), else defaults:
  lr            learning rate (search it on a log scale)
  hidden        hidden units
  batch_size    minibatch size
  weight_decay  L2 penalty added to the gradient
  optimizer     sgd (heavy-ball momentum) | adam
  momentum      SGD momentum, or Adam's beta1

Every epoch prints one line (Sextant's metric protocol):
  epoch=E train_loss=... val_loss=... val_accuracy=...

SEXTANT_FIDELITY (or --epochs): train up to that epoch, then exit 0.
SEXTANT_CHECKPOINT_DIR (or --checkpoint-dir): after each epoch, save weights, optimiser state,
RNG state and the epoch atomically (write a temporary file, fsync, rename, fsync the folder);
on start, resume from it when present. Resuming gives bit-for-bit the same run as not stopping.

--cache-dir (or FASHION_MNIST_CACHE_DIR) keeps the decoded images as .npy files, so that short
trials do not spend their start decompressing 26 MB. --epoch-log FILE appends one JSON line per
trained epoch (for benchmarks that count epochs).

Set OPENBLAS_NUM_THREADS=1 when several trials share a machine (this script sets it to 1 unless
it is already set, before numpy is imported).

Exit status: 0 on success, 2 on bad arguments, 3 when the data set is missing or malformed,
4 on an unusable checkpoint.
"""

import argparse
import json
import os
import struct
import sys
import time
import zlib

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402  (after OPENBLAS_NUM_THREADS)

DATA_DIR = "/usr/share/datasets/fashion-mnist"
TRAIN_IMAGES = "train-images-idx3-ubyte.gz"
TRAIN_LABELS = "train-labels-idx1-ubyte.gz"
N_TRAIN_FILE = 60000
N_VAL = 10000
ROWS = COLS = 28
N_CLASSES = 10
CHECKPOINT = "checkpoint.npz"
CHECKPOINT_FORMAT = 1

MISSING_HINT = ("the Fashion-MNIST data comes from the Debian package dataset-fashion-mnist; "
                "install it with: apt-get install dataset-fashion-mnist")


class DataError(Exception):
    pass


class CheckpointError(Exception):
    pass


# ----------------------------------------------------------------------------------------- data

def _read_gz(path):
    if not os.path.exists(path):
        raise DataError(f"{path}: no such file; {MISSING_HINT}")
    try:
        with open(path, "rb") as f:
            return zlib.decompress(f.read(), 31)  # 31: gzip framing; faster than gzip.open
    except (OSError, zlib.error) as e:
        raise DataError(f"{path}: not a readable gzip file ({e}); reinstall it with: "
                        "apt-get install --reinstall dataset-fashion-mnist") from e


def load_idx_images(path, count):
    raw = _read_gz(path)
    if len(raw) < 16:
        raise DataError(f"{path}: {len(raw)} bytes, too short for an IDX image header")
    magic, n, rows, cols = struct.unpack(">IIII", raw[:16])
    if magic != 0x00000803:
        raise DataError(f"{path}: magic number 0x{magic:08x}, expected 0x00000803 (IDX unsigned "
                        "byte, 3 dimensions)")
    if n != count or rows != ROWS or cols != COLS:
        raise DataError(f"{path}: holds {n} images of {rows}x{cols}, expected {count} of "
                        f"{ROWS}x{COLS}")
    if len(raw) != 16 + n * rows * cols:
        raise DataError(f"{path}: {len(raw) - 16} bytes of pixels, expected {n * rows * cols}")
    return np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, rows * cols)


def load_idx_labels(path, count):
    raw = _read_gz(path)
    if len(raw) < 8:
        raise DataError(f"{path}: {len(raw)} bytes, too short for an IDX label header")
    magic, n = struct.unpack(">II", raw[:8])
    if magic != 0x00000801:
        raise DataError(f"{path}: magic number 0x{magic:08x}, expected 0x00000801 (IDX unsigned "
                        "byte, 1 dimension)")
    if n != count:
        raise DataError(f"{path}: holds {n} labels, expected {count}")
    if len(raw) != 8 + n:
        raise DataError(f"{path}: {len(raw) - 8} bytes of labels, expected {n}")
    labels = np.frombuffer(raw, dtype=np.uint8, offset=8)
    if labels.max() >= N_CLASSES:
        raise DataError(f"{path}: label {int(labels.max())} out of range 0..{N_CLASSES - 1}")
    return labels


def _load_train_file(data_dir, cache_dir):
    """The 60,000 training images (uint8, 60000x784) and labels, validated.

    With cache_dir, the decoded arrays are kept there as .npy files (keyed by the size and
    mtime of the .gz files) and memory-mapped on later runs: decompressing 26 MB is most of a
    short trial's start-up."""
    img_path = os.path.join(data_dir, TRAIN_IMAGES)
    lbl_path = os.path.join(data_dir, TRAIN_LABELS)
    if not os.path.isdir(data_dir):
        raise DataError(f"{data_dir}: no such folder; {MISSING_HINT}")
    for p in (img_path, lbl_path):
        if not os.path.exists(p):
            raise DataError(f"{p}: no such file; {MISSING_HINT}")
    if cache_dir:
        key = "-".join(f"{os.stat(p).st_size}.{os.stat(p).st_mtime_ns}" for p in
                       (img_path, lbl_path))
        ci = os.path.join(cache_dir, f"fashion-mnist-train-images-{key}.npy")
        cl = os.path.join(cache_dir, f"fashion-mnist-train-labels-{key}.npy")
        try:
            images = np.load(ci, mmap_mode="r")
            labels = np.load(cl)
            if (images.dtype == np.uint8 and images.shape == (N_TRAIN_FILE, ROWS * COLS) and
                    labels.dtype == np.uint8 and labels.shape == (N_TRAIN_FILE,) and
                    int(labels.max()) < N_CLASSES):
                return images, labels
        except (OSError, ValueError):
            pass
    images = load_idx_images(img_path, N_TRAIN_FILE)
    labels = load_idx_labels(lbl_path, N_TRAIN_FILE)
    if cache_dir:
        os.makedirs(cache_dir, exist_ok=True)
        for final, arr in ((ci, images), (cl, labels)):
            tmp = f"{final}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                np.save(f, arr)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, final)
    return images, labels


def load_data(data_dir, train_subset, cache_dir=None):
    images, labels = _load_train_file(data_dir, cache_dir)
    n_fit = N_TRAIN_FILE - N_VAL
    # Deterministic split: the last 10,000 are validation, the first train_subset are training.
    scale = np.float32(1.0 / 255.0)
    xtr = np.asarray(images[:train_subset], dtype=np.float32) * scale
    xva = np.asarray(images[n_fit:], dtype=np.float32) * scale
    mean = xtr.mean(axis=0)  # per-pixel centring with the training images' statistics
    xtr -= mean
    xva -= mean
    return (xtr, labels[:train_subset].astype(np.int64),
            xva, labels[n_fit:].astype(np.int64))


# ---------------------------------------------------------------------------------------- model

def init_params(rng, hidden):
    d = ROWS * COLS
    return {
        "w1": (rng.standard_normal((d, hidden)) * np.sqrt(2.0 / d)).astype(np.float32),
        "b1": np.zeros(hidden, np.float32),
        "w2": (rng.standard_normal((hidden, N_CLASSES)) * np.sqrt(2.0 / hidden)).astype(np.float32),
        "b2": np.zeros(N_CLASSES, np.float32),
    }


def forward(p, x):
    h = x @ p["w1"]
    h += p["b1"]
    np.maximum(h, 0, out=h)
    logits = h @ p["w2"]
    logits += p["b2"]
    return h, logits


def softmax_xent(logits, y):
    """Mean cross-entropy, and the softmax probabilities."""
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    probs = e / s
    loss = float(np.mean(np.log(s[:, 0]) - z[np.arange(len(y)), y]))
    return loss, probs


def evaluate(p, x, y, chunk=5000):
    loss_sum, correct = 0.0, 0
    for i in range(0, len(y), chunk):
        _, logits = forward(p, x[i:i + chunk])
        loss, _ = softmax_xent(logits, y[i:i + chunk])
        loss_sum += loss * len(y[i:i + chunk])
        correct += int(np.sum(np.argmax(logits, axis=1) == y[i:i + chunk]))
    return loss_sum / len(y), correct / len(y)


def grads(p, x, y):
    h, logits = forward(p, x)
    loss, probs = softmax_xent(logits, y)
    d = probs
    d[np.arange(len(y)), y] -= 1.0
    d /= np.float32(len(y))
    g = {"w2": h.T @ d, "b2": d.sum(axis=0)}
    dh = d @ p["w2"].T
    dh *= (h > 0)
    g["w1"] = x.T @ dh
    g["b1"] = dh.sum(axis=0)
    return loss, g


class Optimizer:
    """SGD with heavy-ball momentum, or Adam (momentum = beta1); L2 weight decay on weights."""

    def __init__(self, kind, lr, momentum, weight_decay, params):
        self.kind, self.lr, self.mu, self.wd = kind, lr, momentum, weight_decay
        self.step_count = 0
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()} if kind == "adam" else {}

    def step(self, p, g):
        self.step_count += 1
        lr = np.float32(self.lr)
        for k in p:
            gk = g[k]
            if self.wd > 0 and k.startswith("w"):
                gk = gk + np.float32(self.wd) * p[k]
            if self.kind == "sgd":
                m = self.m[k]
                m *= np.float32(self.mu)
                m += gk
                p[k] -= lr * m
            else:
                b1, b2, eps = self.mu, 0.999, 1e-8
                m, v = self.m[k], self.v[k]
                m *= np.float32(b1)
                m += np.float32(1 - b1) * gk
                v *= np.float32(b2)
                v += np.float32(1 - b2) * gk * gk
                mhat_scale = np.float32(1.0 / (1 - b1 ** self.step_count))
                vhat_scale = np.float32(1.0 / (1 - b2 ** self.step_count))
                p[k] -= lr * (m * mhat_scale) / (np.sqrt(v * vhat_scale) + np.float32(eps))

    def state(self):
        out = {f"opt_m_{k}": v for k, v in self.m.items()}
        out.update({f"opt_v_{k}": v for k, v in self.v.items()})
        return out

    def load(self, arrays, step_count):
        self.step_count = step_count
        for k in self.m:
            self.m[k] = arrays[f"opt_m_{k}"].copy()
        for k in self.v:
            self.v[k] = arrays[f"opt_v_{k}"].copy()


# ----------------------------------------------------------------------------------- checkpoint

def save_checkpoint(folder, params, opt, rng, epoch, config, last_line):
    os.makedirs(folder, exist_ok=True)
    meta = {"format": CHECKPOINT_FORMAT, "epoch": epoch, "config": config,
            "rng": rng.bit_generator.state, "opt_steps": opt.step_count, "last_line": last_line}
    arrays = dict(params)
    arrays.update(opt.state())
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    final = os.path.join(folder, CHECKPOINT)
    tmp = os.path.join(folder, f".{CHECKPOINT}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def load_checkpoint(folder, config):
    """Returns (params, opt_arrays, meta) or None when there is no checkpoint."""
    path = os.path.join(folder, CHECKPOINT)
    if not os.path.exists(path):
        return None
    try:
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(arrays.pop("meta").tobytes().decode())
    except Exception as e:  # a torn file cannot happen (rename), but a foreign one can
        raise CheckpointError(f"{path}: unreadable checkpoint ({e}); delete it to start over")
    if meta.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: checkpoint format {meta.get('format')}, expected "
                              f"{CHECKPOINT_FORMAT}; delete it to start over")
    if meta["config"] != config:
        raise CheckpointError(f"{path}: saved with different settings {meta['config']}, now "
                              f"{config}; delete it to start over")
    params = {k: arrays.pop(k) for k in ("w1", "b1", "w2", "b2")}
    return params, arrays, meta


# ------------------------------------------------------------------------------------------ cli

PARAMS = {
    # name: (type, default)
    "lr": (float, 0.01),
    "hidden": (int, 128),
    "batch_size": (int, 128),
    "weight_decay": (float, 0.0),
    "optimizer": (str, "sgd"),
    "momentum": (float, 0.9),
}


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Numpy MLP on Fashion-MNIST; hyperparameters from argv or SEXTANT_PARAM_*.")
    for name, (typ, _) in PARAMS.items():
        ap.add_argument("--" + name.replace("_", "-"), dest=name, type=str, default=None,
                        help=f"default: SEXTANT_PARAM_{name.upper()}, else {PARAMS[name][1]}")
    ap.add_argument("--epochs", type=int, default=None,
                    help="train up to this epoch (default: SEXTANT_FIDELITY, else 9)")
    ap.add_argument("--train-subset", type=int, default=20000,
                    help="training images used per epoch, 1..50000 (default 20000)")
    ap.add_argument("--seed", type=int, default=0, help="initialisation and shuffling seed")
    ap.add_argument("--data-dir", default=DATA_DIR)
    ap.add_argument("--cache-dir", default=os.environ.get("FASHION_MNIST_CACHE_DIR") or None,
                    help="keep the decoded images here (default: FASHION_MNIST_CACHE_DIR; "
                    "none: decode the .gz files every run)")
    ap.add_argument("--checkpoint-dir", default=None,
                    help="default: SEXTANT_CHECKPOINT_DIR; none: no checkpoints")
    ap.add_argument("--epoch-log", default=None,
                    help="append one JSON line per trained epoch here (for benchmarks)")
    ap.add_argument("--tag", default=None, help="trial label in --epoch-log "
                    "(default: SEXTANT_TRIAL_ID)")
    args = ap.parse_args(argv)

    hp = {}
    for name, (typ, default) in PARAMS.items():
        raw = getattr(args, name)
        src = f"--{name.replace('_', '-')}"
        if raw is None:
            raw = os.environ.get(f"SEXTANT_PARAM_{name.upper()}")
            src = f"SEXTANT_PARAM_{name.upper()}"
        if raw is None:
            hp[name] = default
            continue
        try:
            hp[name] = typ(float(raw)) if typ is int else typ(raw)
        except ValueError:
            ap.error(f"{src}={raw!r}: not a valid {typ.__name__}")
    if not (hp["lr"] > 0):
        ap.error(f"lr must be > 0, got {hp['lr']}")
    if hp["hidden"] < 1 or hp["batch_size"] < 1:
        ap.error("hidden and batch_size must be >= 1")
    if hp["weight_decay"] < 0:
        ap.error("weight_decay must be >= 0")
    if not (0 <= hp["momentum"] < 1):
        ap.error(f"momentum must be in [0, 1), got {hp['momentum']}")
    if hp["optimizer"] not in ("sgd", "adam"):
        ap.error(f"optimizer must be sgd or adam, got {hp['optimizer']!r}")
    if not (1 <= args.train_subset <= N_TRAIN_FILE - N_VAL):
        ap.error(f"--train-subset must be in 1..{N_TRAIN_FILE - N_VAL}")

    if args.epochs is None:
        fid = os.environ.get("SEXTANT_FIDELITY")
        if fid:
            try:
                args.epochs = int(round(float(fid)))
            except ValueError:
                ap.error(f"SEXTANT_FIDELITY={fid!r}: not a number")
        else:
            args.epochs = 9
    if args.epochs < 1:
        ap.error(f"epochs (SEXTANT_FIDELITY) must be >= 1, got {args.epochs}")
    if args.checkpoint_dir is None:
        args.checkpoint_dir = os.environ.get("SEXTANT_CHECKPOINT_DIR") or None
    if args.tag is None:
        args.tag = os.environ.get("SEXTANT_TRIAL_ID", "")
    return args, hp


def log_epoch(path, record):
    # One write(2) on an O_APPEND descriptor: lines from concurrent trials do not interleave.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    finally:
        os.close(fd)


def main(argv):
    args, hp = parse_args(argv)
    config = dict(hp, train_subset=args.train_subset, seed=args.seed)

    try:
        xtr, ytr, xva, yva = load_data(args.data_dir, args.train_subset, args.cache_dir)
    except DataError as e:
        print(f"train.py: {e}", file=sys.stderr)
        return 3

    rng = np.random.Generator(np.random.PCG64(args.seed))
    params = init_params(rng, hp["hidden"])
    opt = Optimizer(hp["optimizer"], hp["lr"], hp["momentum"], hp["weight_decay"], params)
    epoch = 0
    last_line = None
    if args.checkpoint_dir:
        try:
            ck = load_checkpoint(args.checkpoint_dir, config)
        except CheckpointError as e:
            print(f"train.py: {e}", file=sys.stderr)
            return 4
        if ck is not None:
            params, opt_arrays, meta = ck
            opt = Optimizer(hp["optimizer"], hp["lr"], hp["momentum"], hp["weight_decay"], params)
            opt.load(opt_arrays, meta["opt_steps"])
            rng.bit_generator.state = meta["rng"]
            epoch, last_line = meta["epoch"], meta["last_line"]
            print(f"train.py: resumed from {args.checkpoint_dir} at epoch {epoch}",
                  file=sys.stderr, flush=True)

    if epoch >= args.epochs:
        # Nothing left to train: report where the checkpoint stands so the objective is known.
        if last_line:
            print(last_line, flush=True)
        return 0

    n = len(ytr)
    bs = hp["batch_size"]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        while epoch < args.epochs:
            t0 = time.monotonic()
            order = rng.permutation(n)
            loss_sum = 0.0
            for i in range(0, n, bs):
                idx = order[i:i + bs]
                loss, g = grads(params, xtr[idx], ytr[idx])
                opt.step(params, g)
                loss_sum += loss * len(idx)
            epoch += 1
            train_loss = loss_sum / n
            val_loss, val_acc = evaluate(params, xva, yva)
            last_line = (f"epoch={epoch} train_loss={train_loss:.6f} val_loss={val_loss:.6f} "
                         f"val_accuracy={val_acc:.4f}")
            if args.checkpoint_dir:
                save_checkpoint(args.checkpoint_dir, params, opt, rng, epoch, config, last_line)
            if args.epoch_log:
                log_epoch(args.epoch_log, {
                    "t": time.time(), "tag": args.tag, "epoch": epoch, "val_accuracy": val_acc,
                    "val_loss": val_loss if np.isfinite(val_loss) else None,
                    "seconds": round(time.monotonic() - t0, 4)})
            # Print after the checkpoint is durable: a reported epoch is always resumable.
            print(last_line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
