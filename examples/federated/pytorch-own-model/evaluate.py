"""The orchestrator's evaluation of the global model (federation.evaluate_command), run from
this folder after each evaluated round: SmallCnn with the weights in SEXTANT_GLOBAL_MODEL on the
held-out images in validation/. Its eval_loss and eval_accuracy are the round's global metrics.
"""
import os

import torch

from site_data import SmallCnn, evaluate, load_images, model_file

torch.set_num_threads(1)
model = SmallCnn()
model.load_state_dict(model_file.load_state_dict(os.environ["SEXTANT_GLOBAL_MODEL"]))
x, y = load_images("validation")
loss, accuracy = evaluate(model, x, y)
print(f"eval_loss={loss:.6f} eval_accuracy={accuracy:.6f} eval_examples={len(y)}")
