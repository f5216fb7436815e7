"""Minimal safetensors reader/writer on numpy + torch.

Debian's python3 has no `safetensors` package, and the format is simple enough to handle directly:
an 8-byte little-endian header length, a JSON header, then raw little-endian tensor data.
BF16 is handled as the upper 16 bits of a float32 (round-to-nearest-even on write).
"""
import json
import struct

import numpy as np
import torch

_NP_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}
_ELEM_SIZE = {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "F16": 2, "BF16": 2, "I16": 2,
              "I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1}


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (nearest, ties to even), returned as uint16 bit patterns."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(x)
    out = rounded.astype(np.uint16)
    out[nan] = 0x7FC0
    return out


def round_to_bf16(t: torch.Tensor) -> torch.Tensor:
    """float32 tensor -> float32 tensor holding the nearest bfloat16 values."""
    return t.to(torch.bfloat16).to(torch.float32)


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return header, 8 + n


def load(path, skip_dtypes=("F8_E4M3",)):
    """Load every tensor as a torch tensor (BF16 upcast to float32). Returns (tensors, metadata)."""
    header, base = read_header(path)
    with open(path, "rb") as f:
        raw = f.read()
    out = {}
    meta = header.pop("__metadata__", {})
    for name, info in header.items():
        dt = info["dtype"]
        if dt in skip_dtypes:
            continue
        a, b = info["data_offsets"]
        buf = raw[base + a: base + b]
        if dt == "BF16":
            arr = bf16_bits_to_f32(np.frombuffer(buf, dtype=np.uint16))
        else:
            arr = np.frombuffer(buf, dtype=_NP_DTYPES[dt]).copy()
        out[name] = torch.from_numpy(arr.reshape(info["shape"]).copy())
    return out, meta


def save(path, tensors, dtypes=None, metadata=None):
    """Write tensors. `dtypes` maps name -> safetensors dtype ("BF16", "F32", "I64", ...);
    float tensors default to F32. Tensors are ordered by element size then name so every
    tensor starts at a multiple of its element size."""
    dtypes = dtypes or {}
    items = []
    for name, t in tensors.items():
        t = t.detach().cpu() if isinstance(t, torch.Tensor) else torch.as_tensor(t)
        dt = dtypes.get(name)
        if dt is None:
            dt = "I64" if t.dtype == torch.int64 else "F32"
        if dt == "BF16":
            data = f32_to_bf16_bits(t.to(torch.float32).numpy()).tobytes()
        else:
            data = np.ascontiguousarray(t.numpy().astype(_NP_DTYPES[dt])).tobytes()
        items.append((name, dt, list(t.shape), data))
    items.sort(key=lambda it: (-_ELEM_SIZE[it[1]], it[0]))
    header = {}
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    offset = 0
    for name, dt, shape, data in items:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    hbytes = json.dumps(header, separators=(",", ":")).encode()
    hbytes += b" " * ((8 - len(hbytes) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hbytes)))
        f.write(hbytes)
        for _, _, _, data in items:
            f.write(data)
