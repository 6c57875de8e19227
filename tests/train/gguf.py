# SPDX-License-Identifier: LGPL-2.1-or-later
"""Reads the tensors of a GGUF file (v3) as float32 arrays.

Only what tests/train/train.py writes through npu-train-export: F32, F16
and MXFP4 tensors.  MXFP4 is decoded as ggml and gst/core/formats/npumxfp4.c
decode it (block of 32: an E8M0 scale byte, then 16 bytes whose low
nibbles are elements 0-15 and high nibbles 16-31, E2M1 codes), so the
values are exactly those the runtime multiplies by.  Used to start a
training stage from committed files (train.py --audio-from).
"""

import struct

import numpy as np

GGML_F32, GGML_F16, GGML_MXFP4 = 0, 1, 39
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                 -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
                dtype=np.float32)

# GGUF metadata value types: struct format of the scalars
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?",
           10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9


class Reader:
    def __init__(self, data):
        self.data, self.off = data, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.data, self.off)
        self.off += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take("Q")
        s = self.data[self.off:self.off + n].decode("utf-8")
        self.off += n
        return s

    def value(self, t):
        if t == STRING:
            return self.string()
        if t == ARRAY:
            et, n = self.take("I"), self.take("Q")
            return [self.value(et) for _ in range(n)]
        return self.take(SCALARS[t])


def mxfp4_decode(raw, n):
    b = np.frombuffer(raw, dtype=np.uint8).reshape(n // 32, 17)
    # 2^(e - 127), with e = 0 giving 2^-127 (a float32 subnormal)
    scale = np.ldexp(np.float32(1.0), b[:, 0].astype(np.int32) - 127)
    qs = b[:, 1:]
    v = np.concatenate([E2M1[qs & 0xf], E2M1[qs >> 4]], axis=1)
    return (v * scale[:, None].astype(np.float32)).reshape(-1)


def read(path):
    """(metadata dict, {name: float32 array in ggml's ne order reversed,
    i.e. numpy's row-major shape})."""
    with open(path, "rb") as f:
        data = f.read()
    r = Reader(data)
    if data[:4] != b"GGUF":
        raise ValueError("%s: not a GGUF file" % path)
    r.off = 4
    version, n_tensors, n_kv = r.take("I"), r.take("Q"), r.take("Q")
    if version != 3:
        raise ValueError("%s: GGUF version %d, not 3" % (path, version))
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        meta[key] = r.value(r.take("I"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        nd = r.take("I")
        ne = [r.take("Q") for _ in range(nd)]
        infos.append((name, ne, r.take("I"), r.take("Q")))
    align = meta.get("general.alignment", 32)
    base = (r.off + align - 1) // align * align
    tensors = {}
    for name, ne, t, off in infos:
        n = int(np.prod(ne))
        at = base + off
        if t == GGML_F32:
            a = np.frombuffer(data, dtype="<f4", count=n, offset=at)
        elif t == GGML_F16:
            a = np.frombuffer(data, dtype="<f2", count=n,
                              offset=at).astype(np.float32)
        elif t == GGML_MXFP4:
            a = mxfp4_decode(data[at:at + n // 32 * 17], n)
        else:
            raise ValueError("%s: tensor %s of type %d" % (path, name, t))
        tensors[name] = a.astype(np.float32).reshape(ne[::-1])
    return meta, tensors
