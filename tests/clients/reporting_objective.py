"""A command trial that uses the Python client as its reporter: it reads its parameters with
sextant.params(), trains "epochs" up to SEXTANT_FIDELITY from its checkpoint, and reports each
with sextant.report(). The loss falls towards a floor set by the parameters."""
import os
import sys

import sextant

p = sextant.params()
# The types the space declares: a float, an int and a category.
if not (isinstance(p["x"], float) and isinstance(p["width"], int) and isinstance(p["act"], str)):
    sys.exit(f"wrong parameter types: {p!r}")
floor = (p["x"] - 0.3) ** 2 + 0.1 * p["width"] + (0.5 if p["act"] == "tanh" else 0.0)

ckpt = os.path.join(os.environ["SEXTANT_CHECKPOINT_DIR"], "epoch")
epoch = int(open(ckpt).read()) if os.path.exists(ckpt) else 0
target = int(float(os.environ.get("SEXTANT_FIDELITY", "9")))
while epoch < target:
    epoch += 1
    print(f"training epoch {epoch}")  # prose between the metric lines
    sextant.report(epoch=epoch, loss=floor + 1.0 / epoch)
    os.makedirs(os.path.dirname(ckpt), exist_ok=True)
    with open(ckpt + ".tmp", "w") as f:
        f.write(str(epoch))
    os.replace(ckpt + ".tmp", ckpt)
