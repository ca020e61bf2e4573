"""A federated client in plain PyTorch, run by `sextant-worker --role client` once per round.

Sextant writes the global model as a safetensors file of named tensors (the built-in `mlp`'s:
fc1.weight, fc1.bias, fc2.weight, ..., each weight stored [in, out], the transpose of
torch.nn.Linear's) and this client's data share as .npy files; the script trains from the global
model and writes its model back as safetensors with the same names, dtypes and shapes. It prints
`num_examples=N` (the weight of its update) and `train_loss=X`.
"""
import os

import numpy as np
import torch

# model_file.py beside this script is a copy of the Python client's helper
# (clients/python/sextant/model_file.py, numpy only), so this folder runs wherever it is copied;
# with the client installed (scripts/install-python-client), `from sextant import model_file`
# is the same module.
import model_file

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


def load_global(model, path):
    tensors, _ = model_file.read(path)
    with torch.no_grad():
        for i, lin in enumerate(linears(model), 1):
            lin.weight.copy_(torch.from_numpy(np.ascontiguousarray(tensors[f"fc{i}.weight"].T)))
            lin.bias.copy_(torch.from_numpy(tensors[f"fc{i}.bias"]))


def save(model, path):
    tensors = {}
    for i, lin in enumerate(linears(model), 1):
        tensors[f"fc{i}.weight"] = lin.weight.detach().numpy().T
        tensors[f"fc{i}.bias"] = lin.bias.detach().numpy()
    model_file.write(path, tensors)  # float32: F32, as the global model has them


def main():
    env = os.environ
    torch.set_num_threads(1)
    torch.manual_seed(int(env["SEXTANT_SEED"]) % (2**63))
    x = torch.from_numpy(np.load(env["SEXTANT_TRAIN_X"]))
    y = torch.from_numpy(np.load(env["SEXTANT_TRAIN_Y"]).astype(np.int64))
    model = build()
    load_global(model, env["SEXTANT_GLOBAL_MODEL"])
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
    save(model, env["SEXTANT_UPDATED_MODEL"])
    print(f"num_examples={len(y)} train_loss={total / max(seen, 1):.6f}")


if __name__ == "__main__":
    main()
