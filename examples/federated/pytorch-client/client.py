"""A federated client in plain PyTorch, run by `sextant-worker --role client` once per round.

Sextant writes the global model as a flat float32 .npy (the parameter order of the built-in
`mlp`: for each dense layer its weight as [in, out] row-major, then its bias) and this client's
data share as .npy files; the script trains from the global model and writes its weights back.
It prints `num_examples=N` (the weight of its update) and `train_loss=X`.
"""
import os

import numpy as np
import torch

HIDDEN = [64]  # must match trial.builtin.args.hidden in the experiment file
INPUTS, CLASSES = 28 * 28, 10


def build():
    layers, width = [], INPUTS
    for h in HIDDEN:
        layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
        width = h
    layers.append(torch.nn.Linear(width, CLASSES))
    return torch.nn.Sequential(*layers)


def linears(model):
    return [m for m in model if isinstance(m, torch.nn.Linear)]


def load_flat(model, flat):
    at = 0
    with torch.no_grad():
        for lin in linears(model):
            n_in, n_out = lin.in_features, lin.out_features
            w = flat[at:at + n_in * n_out].reshape(n_in, n_out)
            at += n_in * n_out
            lin.weight.copy_(torch.from_numpy(np.ascontiguousarray(w.T)))
            lin.bias.copy_(torch.from_numpy(flat[at:at + n_out].copy()))
            at += n_out
    if at != flat.size:
        raise SystemExit(f"the global model has {flat.size} values; this MLP has {at}")


def to_flat(model):
    parts = []
    for lin in linears(model):
        parts += [lin.weight.detach().numpy().T.reshape(-1), lin.bias.detach().numpy()]
    return np.concatenate(parts).astype(np.float32)


def main():
    env = os.environ
    torch.set_num_threads(1)
    torch.manual_seed(int(env["SEXTANT_SEED"]) % (2**63))
    x = torch.from_numpy(np.load(env["SEXTANT_TRAIN_X"]))
    y = torch.from_numpy(np.load(env["SEXTANT_TRAIN_Y"]).astype(np.int64))
    model = build()
    load_flat(model, np.load(env["SEXTANT_GLOBAL_MODEL"]))
    anchor = [p.detach().clone() for p in model.parameters()]
    lr, mu = float(env["SEXTANT_LR"]), float(env["SEXTANT_MU"])
    epochs, batch = int(env["SEXTANT_EPOCHS"]), int(env["SEXTANT_BATCH_SIZE"])
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    total, seen = 0.0, 0
    for _ in range(epochs):
        for idx in torch.randperm(len(y)).split(batch):
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            total, seen = total + loss.item() * len(idx), seen + len(idx)
            if mu > 0:  # FedProx: stay near the global model
                loss = loss + mu / 2 * sum(((p - a) ** 2).sum()
                                           for p, a in zip(model.parameters(), anchor))
            opt.zero_grad()
            loss.backward()
            opt.step()
    np.save(env["SEXTANT_UPDATED_MODEL"], to_flat(model))
    print(f"num_examples={len(y)} train_loss={total / max(seen, 1):.6f}")


if __name__ == "__main__":
    main()
