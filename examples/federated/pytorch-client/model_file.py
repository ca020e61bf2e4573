"""Model files as named tensors: the safetensors format with numpy alone (PyTorch optional).

A federated `client_command` gets the global model in SEXTANT_GLOBAL_MODEL and must write its
trained model to SEXTANT_UPDATED_MODEL, both safetensors files with exactly the same tensor
names, dtypes (F32, F16 or BF16) and shapes; Sextant refuses an update that differs and names
the tensor. With PyTorch:

    from sextant import model_file      # this file needs only numpy: it may also be copied
    model.load_state_dict(model_file.load_state_dict(os.environ["SEXTANT_GLOBAL_MODEL"]))
    ...train...
    model_file.save_state_dict(model.state_dict(), os.environ["SEXTANT_UPDATED_MODEL"],
                               like=os.environ["SEXTANT_GLOBAL_MODEL"])

`like` stores each tensor in the dtype the global model has (a model trained in f32 from a bf16
global model goes back as bf16). Without PyTorch, `read` and `write` work on numpy arrays.

The format: an 8-byte little-endian header length N, N bytes of JSON header mapping each name
to {"dtype", "shape", "data_offsets": [begin, end]} (plus an optional "__metadata__" object of
strings), then the data, little-endian, C order, the tensors tiling it exactly.
"""
import collections
import json
import math
import os
import struct
import tempfile

import numpy as np

__all__ = ["read", "write", "file_dtypes", "load_state_dict", "save_state_dict"]

_SIZES = {"F32": 4, "F16": 2, "BF16": 2}
_MAX_HEADER = 100_000_000


def _header(path):
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ValueError(f"{path}: too short for the 8-byte header length")
        (n,) = struct.unpack("<Q", head)
        if n > _MAX_HEADER:
            raise ValueError(f"{path}: the header length {n} is over {_MAX_HEADER}")
        text = f.read(n)
        if len(text) != n:
            raise ValueError(f"{path}: the header length {n} goes past the end of the file")
        header = json.loads(text)
        data = f.read()
    if not isinstance(header, dict):
        raise ValueError(f"{path}: the header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    entries = sorted(header.items(), key=lambda kv: tuple(kv[1].get("data_offsets", (0, 0))))
    return entries, metadata, data


def _check(path, name, entry, pos, data_size):
    if set(entry) != {"dtype", "shape", "data_offsets"}:
        raise ValueError(f"{path}: tensor {name!r}: needs exactly dtype, shape and data_offsets")
    dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype not in _SIZES:
        raise ValueError(f"{path}: tensor {name!r}: dtype {dtype!r} is not supported "
                         "(F32, F16, BF16)")
    if any(not isinstance(d, int) or d < 0 for d in shape):
        raise ValueError(f"{path}: tensor {name!r}: bad shape {shape}")
    need = math.prod(shape) * _SIZES[dtype]
    if begin != pos or end - begin != need or end > data_size:
        raise ValueError(f"{path}: tensor {name!r}: data_offsets [{begin},{end}] where "
                         f"{dtype} {shape} needs {need} bytes at {pos}")
    return dtype, shape, begin, end


def read(path):
    """The tensors of `path` in file order: (OrderedDict name -> numpy array, dtypes).

    F32 and F16 come as float32 and float16 arrays; BF16 (which numpy lacks) comes widened to
    float32, exactly. `dtypes` maps each name to "F32", "F16" or "BF16". ValueError, naming the
    tensor, for a malformed file.
    """
    entries, _, data = _header(path)
    tensors, kinds, pos = collections.OrderedDict(), {}, 0
    for name, entry in entries:
        dtype, shape, begin, end = _check(path, name, entry, pos, len(data))
        raw = data[begin:end]
        if dtype == "F32":
            a = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        elif dtype == "F16":
            a = np.frombuffer(raw, dtype="<f2").astype(np.float16)
        else:
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        tensors[name], kinds[name], pos = a.reshape(shape), dtype, end
    if pos != len(data):
        raise ValueError(f"{path}: {len(data) - pos} bytes after the last tensor")
    return tensors, kinds


def file_dtypes(path):
    """Each tensor's dtype name ("F32", "F16", "BF16") in `path`, from its header alone."""
    entries, _, _ = _header(path)
    return collections.OrderedDict((name, entry["dtype"]) for name, entry in entries)


def _to_bf16_bits(values):
    """float32 -> bfloat16 bits, rounding to nearest even; a NaN stays a quiet NaN."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(values)
    rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def _encode(array, dtype):
    a = np.asarray(array)
    if dtype == "F32":
        return a.astype("<f4").tobytes()
    if dtype == "F16":
        return a.astype("<f2").tobytes()
    return _to_bf16_bits(a.astype(np.float32)).astype("<u2").tobytes()


def _kind(array):
    a = np.asarray(array)
    if a.dtype == np.float16:
        return "F16"
    if a.dtype == np.float32:
        return "F32"
    raise ValueError(f"dtype {a.dtype} has no safetensors kind here; pass dtypes=")


def write(path, tensors, dtypes=None, metadata=None):
    """Writes `tensors` (name -> numpy array, in this order) to `path` atomically.

    Each is stored as dtypes[name] ("F32", "F16" or "BF16", rounding to nearest even), or by its
    own numpy dtype (float32 or float16) when dtypes does not name it.
    """
    dtypes = dtypes or {}
    entries, chunks, pos = {}, [], 0
    if metadata:
        entries["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, array in tensors.items():
        kind = dtypes.get(name) or _kind(array)
        if kind not in _SIZES:
            raise ValueError(f"tensor {name!r}: dtype {kind!r} is not supported (F32, F16, BF16)")
        raw = _encode(array, kind)
        shape = list(np.shape(array))
        entries[name] = {"dtype": kind, "shape": shape, "data_offsets": [pos, pos + len(raw)]}
        chunks.append(raw)
        pos += len(raw)
    text = json.dumps(entries, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=os.path.basename(path) + ".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text)
            for raw in chunks:
                f.write(raw)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_state_dict(path):
    """`path` as a PyTorch state_dict (OrderedDict of tensors in the file's own dtypes)."""
    import torch

    kinds = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
    tensors, names = read(path)
    return collections.OrderedDict(
        (name, torch.from_numpy(np.array(a)).to(kinds[names[name]])) for name, a in tensors.items())


def save_state_dict(state_dict, path, like=None, dtypes=None):
    """Writes a PyTorch state_dict to `path`: each tensor in the dtype `dtypes` names, else in the
    one it has in the model file `like` (e.g. the global model), else in its own (float32,
    float16 or bfloat16). Tensors of other dtypes (e.g. BatchNorm's integer
    num_batches_tracked) are left out: load such a model back with strict=False."""
    import torch

    own = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
    wanted = dict(file_dtypes(like)) if like else {}
    wanted.update(dtypes or {})
    arrays, kinds = collections.OrderedDict(), {}
    for name, t in state_dict.items():
        t = t.detach().cpu()
        kind = wanted.get(name) or own.get(t.dtype)
        if kind is None:
            continue
        arrays[name] = t.to(torch.float16).numpy() if kind == "F16" else t.float().numpy()
        kinds[name] = kind
    write(path, arrays, kinds)
