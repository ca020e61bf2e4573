#!/usr/bin/python3
"""Writes the seed corpora of the model-file and RPC fuzz targets (tests/fuzz/corpus/<target>/).

Protobuf messages are encoded by hand in the wire format (no generated Python code needed);
records follow tests/fuzz/internal/records.h: a tag byte, a little-endian 16-bit length, bytes.
Run from anywhere: /usr/bin/python3 tests/fuzz/make_seeds.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def f_int(field, n):
    return varint(field << 3) + varint(n)


def f_double(field, x):
    return varint(field << 3 | 1) + struct.pack('<d', x)


def f_bytes(field, b):
    if isinstance(b, str):
        b = b.encode()
    return varint(field << 3 | 2) + varint(len(b)) + b


def floats(*xs):
    return struct.pack('<%df' % len(xs), *xs)


def record(tag, payload=b''):
    return bytes([tag]) + struct.pack('<H', len(payload)) + payload


def write(target, name, data):
    d = os.path.join(HERE, 'corpus', target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


def npy(header_dict, data, major=1):
    magic = b'\x93NUMPY' + bytes([major, 0])
    hlen_bytes = 2 if major == 1 else 4
    unpadded = len(magic) + hlen_bytes + len(header_dict) + 1
    header = header_dict + ' ' * ((64 - unpadded % 64) % 64) + '\n'
    fmt = '<H' if major == 1 else '<I'
    return magic + struct.pack(fmt, len(header)) + header.encode() + data


def npy_seeds():
    t = 'npy_fuzz'
    d = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }"
    write(t, 'vector', npy(d % '(3,)', floats(1, 2, 3)))
    write(t, 'matrix', npy(d % '(2, 2)', floats(1, -2, 3.5, 0)))
    write(t, 'scalar', npy(d % '()', floats(7)))
    write(t, 'empty', npy(d % '(0,)', b''))
    write(t, 'version2', npy(d % '(2,)', floats(1, 2), major=2))
    write(t, 'float64', npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", b'\0' * 8))
    write(t, 'fortran', npy("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", floats(1)))
    write(t, 'truncated', npy(d % '(4,)', floats(1, 2)))
    write(t, 'extra-key', npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
                              floats(1)))


def u64(n):
    return struct.pack('<Q', n & ((1 << 64) - 1))


def vec(*xs):
    return u64(len(xs)) + floats(*xs)


def global_checkpoint_seeds():
    t = 'global_checkpoint_fuzz'
    model = vec(1, 2, 3, 4)
    write(t, 'fedavg', u64(3) + model + u64(3) + u64(0) + vec() + u64(0) + vec())
    write(t, 'fedadam', u64(5) + model + u64(5) + u64(4) + vec(0.1, 0.2, 0.3, 0.4) + u64(4) +
          vec(0.01, 0.02, 0.03, 0.04))
    write(t, 'huge-moment', u64(1) + model + u64(1) + u64(1 << 62) + vec())
    write(t, 'negative-moment', u64(1) + model + u64(1) + u64(-1) + vec())
    write(t, 'negative-round', u64(-5) + model + u64(0) + u64(0) + vec() + u64(0) + vec())
    write(t, 'truncated', u64(1) + model[:10])


def worker_service_seeds():
    t = 'worker_service_fuzz'
    register = f_int(1, 1) + f_bytes(2, 'local') + f_bytes(3, 'pool') + f_bytes(6, 'tok')
    lease = f_int(1, 1) + f_double(2, 0.5)
    beat = f_double(4, 50.0) + f_int(5, 1 << 20) + f_int(8, 1)

    def measurement(seq, loss, event=''):
        metric = f_bytes(1, 'loss') + f_double(2, loss)
        m = f_int(3, seq) + f_bytes(4, metric) + f_double(5, 1.5)
        if event:
            m += f_bytes(6, event)
        return m

    report = f_bytes(2, measurement(1, 0.5)) + f_bytes(2, measurement(2, 0.25))
    complete = f_bytes(4, measurement(3, 0.1)) + f_int(5, 0) + f_int(8, 1)
    failed = f_int(5, 1) + f_bytes(7, 'error with s3cr3t-token-value in it')
    preempted = f_int(5, -15) + f_int(11, 1)
    write(t, 'register-lease', record(0, register) + record(1, lease))
    write(t, 'happy-path', record(0x82, beat) + record(0x83, report) + record(0x84, complete))
    write(t, 'failure', record(0x83, f_bytes(2, measurement(1, 1.0, 'oom micro_batch=64'))) +
          record(0x84, failed) + record(6) + record(0x84, complete))
    write(t, 'preempted', record(0x84, preempted) + record(6) + record(0x82, beat))
    write(t, 'expiry', record(0x82, beat) + record(5 | (20 << 3)) + record(0x83, report))
    write(t, 'asha', record(0x40 | 0x83, f_bytes(2, f_int(3, 1) + f_bytes(4, f_bytes(1, 'epoch') +
                                                                     f_double(2, 1)) +
                                                f_bytes(4, f_bytes(1, 'loss') + f_double(2, 0.3)))) +
          record(0x84, f_int(9, 2)) + record(7) + record(0x82, beat))
    write(t, 'stale', record(2, f_int(1, 1) + f_int(2, 1) + f_int(3, 7)) +
          record(4, f_int(1, 99) + f_int(2, 1)))
    write(t, 'bad-version', record(0, f_int(1, 9)))


def federation_service_seeds():
    t = 'federation_service_fuzz'
    get = f_bytes(1, 'exp') + f_int(2, -1) + f_bytes(3, 'r/0') + f_double(4, 0)
    header = (f_bytes(1, 'exp') + f_int(2, 0) + f_bytes(3, 'r/0') + f_int(7, 8) + f_double(8, 10.0) +
              f_int(9, 1) + f_bytes(10, f_double(1, 0.5) + f_double(4, 3)))

    def chunk(offset, *xs):
        return f_bytes(1, 'exp') + f_int(2, 0) + f_bytes(3, 'r/0') + f_int(4, offset) + f_bytes(
            5, floats(*xs))

    first = header + f_int(4, 0) + f_bytes(5, floats(1, 2, 3, 4))
    write(t, 'get-round', record(0, get) + record(0x10 | (1 << 5), b'') + record(0x10, f_double(4, -1)))
    write(t, 'push-one', record(1, first) + record(2, chunk(4, 5, 6, 7, 8)))
    full = b''
    for k in range(3):
        full += record(0x11 | (k << 5), f_int(4, 0) + f_bytes(5, floats(1, 2, 3, 4)) + f_double(8, 5)) + \
                record(0x12, f_int(4, 4) + f_bytes(5, floats(1, 2, 3, 4)))
    write(t, 'round-closes', full + record(3) + record(0x10, b''))
    write(t, 'nan', record(1, header + f_bytes(5, floats(float('nan'), 1))))
    write(t, 'odd-bytes', record(1, header + f_bytes(5, b'\x01\x02\x03')))
    write(t, 'other-experiment', record(1, f_bytes(1, 'other') + f_int(7, 8)))
    write(t, 'broken-off', record(0x19, f_int(4, 0) + f_bytes(5, floats(1, 2))) + record(1, first))
    write(t, 'gap', record(1, first) + record(2, chunk(6, 1, 2)))
    # Callers with a client certificate (tag & 0x04, sextant://client/r/N with N = (tag >> 6) % 3):
    # r/0 as itself, r/1 asked for by certificate 0, and pushes as itself and as another.
    write(t, 'caller-as-itself', record(0x14, get) + record(0x15, f_int(4, 0) +
          f_bytes(5, floats(1, 2, 3, 4)) + f_double(8, 5)) + record(0x12, f_int(4, 4) +
          f_bytes(5, floats(1, 2, 3, 4))))
    write(t, 'caller-as-another', record(0x34, get) + record(0x35, f_int(4, 0) +
          f_bytes(5, floats(1, 2, 3, 4)) + f_double(8, 5)) + record(0x12, f_int(4, 4) +
          f_bytes(5, floats(1, 2, 3, 4))))
    write(t, 'caller-weight-changes', record(0x15, f_int(4, 0) + f_bytes(5, floats(1, 2, 3, 4)) +
          f_double(8, 5)) + record(0x12, f_int(4, 4) + f_bytes(5, floats(1, 2, 3, 4))) + record(3) +
          record(0x15, f_int(4, 0) + f_bytes(5, floats(1, 2, 3, 4)) + f_double(8, 9)) +
          record(0x12, f_int(4, 4) + f_bytes(5, floats(1, 2, 3, 4))))


def admin_service_seeds():
    t = 'admin_service_fuzz'
    write(t, 'admin-status', record(0x20, b'\x00') + record(0x41, b'\x02') + record(3))
    write(t, 'worker-drain', record(0x20, b'\x01') + record(0x41, b'\x00') + record(7))
    write(t, 'mtls-enrolled', record(0xA0, b'\x02') + record(0x41, b'\x00') + record(0x12, b'\x00') +
          record(3))
    write(t, 'mtls-unenrolled', record(0xA0, b'\x02') + record(0x41, b'\x00') + record(0x12, b'\x01') +
          record(3))
    write(t, 'mtls-other-ca', record(0xA0, b'\x07') + record(0x41, b'\x01') + record(0x12, b'\x02'))
    write(t, 'no-cert', record(0x80, b'/sextant.v1.WorkerService/Lease') + record(0x41, b'\x00'))
    write(t, 'garbage-token', record(0, b'/sextant.v1.AdminService/Drain') + record(1, b'Bearer x') +
          record(3))
    write(t, 'basic-auth', record(0x20, b'\x00') + record(1, b'Basic YWRtaW46YWRtaW4=') + record(3))
    write(t, 'garbage-pem', record(0x80, b'/x') + record(2, b'-----BEGIN CERTIFICATE-----\nAAAA\n'))
    # Identities: the enrolled worker identity with the admin token calling the admin service
    # (refused: the certificate decides), and the admin identity with no token (let through).
    write(t, 'identity-worker-admin-token', record(0xA0, b'\x00') + record(0x41, b'\x02') +
          record(0x12, b'\x03') + record(3))
    write(t, 'identity-admin-no-token', record(0xA0, b'\x01') + record(0x12, b'\x04') + record(7))
    write(t, 'identity-worker-federation', record(0xA0, b'\x07') + record(0x12, b'\x03'))


if __name__ == '__main__':
    npy_seeds()
    global_checkpoint_seeds()
    worker_service_seeds()
    federation_service_seeds()
    admin_service_seeds()
