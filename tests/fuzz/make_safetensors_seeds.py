#!/usr/bin/python3
"""Writes the seed corpus of safetensors_fuzz (tests/fuzz/corpus/safetensors_fuzz/).

Files in the reference layout (u64 little-endian header length, JSON header, data buffer), laid
out by hand with struct and json: valid ones of each dtype and some of each kind of malformed one.
Run from anywhere: /usr/bin/python3 tests/fuzz/make_safetensors_seeds.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = 'safetensors_fuzz'


def write(name, data):
    d = os.path.join(HERE, 'corpus', TARGET)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


def st(header, data, pad=True):
    h = header if isinstance(header, bytes) else json.dumps(header, separators=(',', ':')).encode()
    if pad:
        h += b' ' * ((8 - len(h) % 8) % 8)
    return struct.pack('<Q', len(h)) + h + data


def entry(dtype, shape, begin, end):
    return {'dtype': dtype, 'shape': shape, 'data_offsets': [begin, end]}


def main():
    f32 = struct.pack('<4f', 1.0, -2.5, 0.0, 3.0)
    f16 = struct.pack('<3H', 0x3c00, 0x7c00, 0x0001)  # 1, inf, the smallest subnormal
    bf16 = struct.pack('<2H', 0x3f80, 0x7fc1)          # 1, a NaN
    write('valid-all-dtypes', st({
        '__metadata__': {'format': 'pt'},
        'fc1.weight': entry('F32', [2, 2], 0, 16),
        'fc1.bias': entry('F16', [3], 16, 22),
        'emb': entry('BF16', [1, 2], 22, 26)}, f32 + f16 + bf16))
    write('scalar-and-empty', st({
        's': entry('BF16', [], 0, 2),
        'e': entry('F32', [0, 5], 2, 2)}, struct.pack('<H', 0x4000)))
    write('empty-model', st({}, b''))
    write('truncated', st({'w': entry('F32', [4], 0, 16)}, f32)[:-5])
    write('overlap', st({'a': entry('F32', [2], 0, 8), 'b': entry('F32', [2], 4, 12)}, f32[:12]))
    write('gap', st({'a': entry('F32', [1], 0, 4), 'b': entry('F32', [1], 8, 12)}, f32[:12]))
    write('unknown-dtype', st({'w': entry('F64', [2], 0, 16)}, f32))
    write('overflowing-shape', st({'w': entry('F32', [2**32, 2**32], 0, 16)}, f32))
    write('offsets-past-end', st({'w': entry('F32', [2**60], 0, 2**62)}, f32))
    write('duplicate-name', st(b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                               b'"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}', f32))
    write('bad-metadata', st({'__metadata__': {'epoch': 3}}, b''))
    write('huge-header-length', struct.pack('<Q', 2**63) + b'{}')
    write('not-an-object', st(b'[[[[1]]]]', b''))


if __name__ == '__main__':
    main()
