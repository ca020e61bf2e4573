#!/usr/bin/python3
"""PyTorch peer of `sextant-train`: the same Fashion-MNIST MLP, batch, optimiser and data split
size, trained for --epochs; prints one `epoch=E samples_per_sec=S train_loss=L` line per epoch,
where samples_per_sec counts only the training steps (batch gather, forward, backward, Adam)."""
import argparse
import gzip
import sys
import time

import numpy as np
import torch


def load_images(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    n, rows, cols = (int.from_bytes(data[i:i + 4], "big") for i in (4, 8, 12))
    return np.frombuffer(data, np.uint8, offset=16).reshape(n, rows * cols)


def load_labels(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    return np.frombuffer(data, np.uint8, offset=8)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--hidden", default="512,256")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--train-size", type=int, default=50000)  # 60,000 less the validation split
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")  # cpu | cuda
    ap.add_argument("--synthetic", action="store_true",
                    help="random images instead of Fashion-MNIST (throughput only)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # FP32, as Sextant's CUDA backend
        torch.backends.cudnn.allow_tf32 = False
    if args.synthetic:
        x = torch.rand(args.train_size, 784)
        y = torch.randint(0, 10, (args.train_size,))
    else:
        x = load_images(f"{args.data_dir}/train-images-idx3-ubyte.gz")[: args.train_size]
        y = load_labels(f"{args.data_dir}/train-labels-idx1-ubyte.gz")[: args.train_size]
        x = torch.from_numpy(x.astype(np.float32) / 255.0)
        y = torch.from_numpy(y.astype(np.int64))
    # The peer's best setup on a GPU: the whole training set resident in device memory.
    x, y = x.to(args.device), y.to(args.device)

    widths = [784] + [int(h) for h in args.hidden.split(",") if h] + [10]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).to(args.device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(args.seed)
    n = x.shape[0]
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(n, generator=gen).to(args.device)
        total = 0.0
        start = time.perf_counter()
        for begin in range(0, n, args.batch_size):
            idx = perm[begin:begin + args.batch_size]
            xb, yb = x[idx], y[idx]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        if args.device == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        print(f"epoch={epoch} samples_per_sec={n / seconds:.1f} train_loss={total / n:.6f}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
