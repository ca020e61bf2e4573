"""clients/python/sextant/model_file.py: safetensors with numpy alone, and PyTorch state_dicts.

The helper is one self-contained file, imported here from its folder so that the test needs
neither the built package nor gRPC (ctest: tests/clients/CMakeLists.txt). By hand:
  python3 -m unittest -v model_file_test      (in tests/clients)
"""
import json
import os
import struct
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python", "sextant"))
import model_file  # noqa: E402

try:
    import torch
except ImportError:
    torch = None


def reference(entries, data):
    """A file laid out by hand: u64 header length, JSON header, data."""
    text = json.dumps(entries).encode()
    return struct.pack("<Q", len(text)) + text + data


class ModelFileTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def test_reads_a_hand_written_file_in_offset_order_with_every_dtype(self):
        data = (np.array([1.5, -2], "<f4").tobytes() + np.array([1, -2], "<f2").tobytes() +
                struct.pack("<2H", 0x3F80, 0xC040))
        with open(self.path("m.safetensors"), "wb") as f:
            f.write(reference({
                "__metadata__": {"format": "pt"},
                "h": {"dtype": "F16", "shape": [2], "data_offsets": [8, 12]},
                "b": {"dtype": "BF16", "shape": [1, 2], "data_offsets": [12, 16]},
                "w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, data))
        tensors, kinds = model_file.read(self.path("m.safetensors"))
        self.assertEqual(list(tensors), ["w", "h", "b"])
        self.assertEqual(kinds, {"w": "F32", "h": "F16", "b": "BF16"})
        self.assertEqual(tensors["w"].tolist(), [1.5, -2.0])
        self.assertEqual(tensors["h"].dtype, np.float16)
        self.assertEqual(tensors["b"].shape, (1, 2))
        self.assertEqual(tensors["b"].tolist(), [[1.0, -3.0]])
        self.assertEqual(model_file.file_dtypes(self.path("m.safetensors")), kinds)

    def test_writes_the_reference_layout_and_rounds_bf16_to_nearest_even(self):
        w = np.array([[1, 2], [3, 4]], np.float32)
        # bf16 values near 1 are 2^-7 apart: 1 + 2^-8 and 1 + 3 * 2^-8 are both halfway, and each
        # goes to the even neighbour (1.0 and 1 + 2^-6).
        b = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8], np.float32)
        model_file.write(self.path("out.safetensors"), {"w": w, "b": b}, {"b": "BF16"})
        with open(self.path("out.safetensors"), "rb") as f:
            raw = f.read()
        (n,) = struct.unpack("<Q", raw[:8])
        self.assertEqual(n % 8, 0)
        header = json.loads(raw[8:8 + n])
        self.assertEqual(header, {
            "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
            "b": {"dtype": "BF16", "shape": [2], "data_offsets": [16, 20]}})
        self.assertEqual(raw[8 + n:8 + n + 16], w.astype("<f4").tobytes())
        self.assertEqual(struct.unpack("<2H", raw[8 + n + 16:]), (0x3F80, 0x3F82))
        tensors, kinds = model_file.read(self.path("out.safetensors"))
        self.assertEqual(tensors["b"].tolist(), [1.0, 1 + 2 ** -6])
        self.assertEqual(kinds, {"w": "F32", "b": "BF16"})
        self.assertEqual([f for f in os.listdir(self.dir.name)], ["out.safetensors"])

    def test_refuses_other_dtypes_and_a_truncated_file_naming_the_tensor(self):
        with open(self.path("f64.safetensors"), "wb") as f:
            f.write(reference({"emb": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}},
                              bytes(8)))
        with self.assertRaisesRegex(ValueError, "tensor 'emb': dtype 'F64' is not supported"):
            model_file.read(self.path("f64.safetensors"))
        with open(self.path("cut.safetensors"), "wb") as f:
            f.write(reference({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}},
                              bytes(8)))
        with self.assertRaisesRegex(ValueError, "tensor 'w': data_offsets"):
            model_file.read(self.path("cut.safetensors"))

    @unittest.skipIf(torch is None, "no PyTorch (python3-torch)")
    def test_a_state_dict_goes_back_in_the_global_models_dtypes(self):
        model_file.write(self.path("global.safetensors"),
                         {"fc.weight": np.zeros((2, 3), np.float32),
                          "fc.bias": np.zeros(2, np.float32)},
                         {"fc.weight": "BF16", "fc.bias": "F16"})
        state = model_file.load_state_dict(self.path("global.safetensors"))
        self.assertEqual(state["fc.weight"].dtype, torch.bfloat16)
        self.assertEqual(state["fc.bias"].dtype, torch.float16)
        model = torch.nn.Sequential()
        model.add_module("fc", torch.nn.Linear(3, 2))  # trains in float32
        model.load_state_dict(state)
        with torch.no_grad():
            model.fc.weight += 0.5
            model.fc.bias -= 0.25
        model_file.save_state_dict(model.state_dict(), self.path("updated.safetensors"),
                                   like=self.path("global.safetensors"))
        tensors, kinds = model_file.read(self.path("updated.safetensors"))
        self.assertEqual(kinds, {"fc.weight": "BF16", "fc.bias": "F16"})
        self.assertEqual(tensors["fc.weight"].tolist(), [[0.5] * 3] * 2)
        self.assertEqual(tensors["fc.bias"].tolist(), [-0.25] * 2)


if __name__ == "__main__":
    unittest.main()
