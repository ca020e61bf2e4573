"""A federated client of its own model on its own data, run once per round by its
`sextant-worker --role client`.

It reads its site's images from SEXTANT_DATA_DIR (train/ and val/), loads the global model
(SEXTANT_GLOBAL_MODEL, safetensors) into SmallCnn, scores it on its held-out images, trains
SEXTANT_EPOCHS epochs of SGD and writes the trained state_dict to SEXTANT_UPDATED_MODEL. It
prints num_examples=N (its update's weight: its training images), train_loss, and eval_loss,
eval_accuracy and eval_examples of the global model it received.
"""
import os

import torch

from site_data import SmallCnn, evaluate, load_images, model_file


def main():
    env = os.environ
    torch.set_num_threads(1)
    torch.manual_seed(int(env["SEXTANT_SEED"]) % (2**63))
    x, y = load_images(os.path.join(env["SEXTANT_DATA_DIR"], "train"))
    val_x, val_y = load_images(os.path.join(env["SEXTANT_DATA_DIR"], "val"))
    model = SmallCnn()
    model.load_state_dict(model_file.load_state_dict(env["SEXTANT_GLOBAL_MODEL"]))
    eval_loss, eval_accuracy = evaluate(model, val_x, val_y)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=float(env["SEXTANT_LR"]), momentum=0.9)
    batch, total, seen = int(env["SEXTANT_BATCH_SIZE"]), 0.0, 0
    for _ in range(int(env["SEXTANT_EPOCHS"])):
        for idx in torch.randperm(len(y)).split(batch):
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total, seen = total + loss.item() * len(idx), seen + len(idx)
    model_file.save_state_dict(model.state_dict(), env["SEXTANT_UPDATED_MODEL"],
                               like=env["SEXTANT_GLOBAL_MODEL"])
    print(f"num_examples={len(y)} train_loss={total / max(seen, 1):.6f} "
          f"eval_loss={eval_loss:.6f} eval_accuracy={eval_accuracy:.6f} eval_examples={len(val_y)}")


if __name__ == "__main__":
    main()
