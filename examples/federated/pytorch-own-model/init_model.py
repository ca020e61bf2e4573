"""Writes init.safetensors: the seeded starting weights of SmallCnn, the first global model."""
import os

import torch

from site_data import SmallCnn, model_file

torch.manual_seed(0)
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "init.safetensors")
model_file.save_state_dict(SmallCnn().state_dict(), path)
print(f"{path}: {sum(p.numel() for p in SmallCnn().parameters())} parameters")
