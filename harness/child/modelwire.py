"""The model server's wire format (issue 45), shared by the server (modelserver.py, which imports it from beside
itself) and the prober (probes/roles/remote.py): stdlib and torch only, nothing of the grader.

A message is an 8-byte header (the JSON part's length and the raw part's length, big-endian), a JSON object, then
the tensors' bytes. A tensor is {"$t": i} in the JSON, the i-th entry of its "tensors" list ({dtype, shape,
offset, nbytes}) and those bytes, little-endian; {"$np": i} the same as a numpy array; {"$tuple": [...]} a tuple;
{"$dict": [[key, value], ...]} a dict; {"$h": n} a handle the server keeps. No pickle on either side. `read`
checks every count, size, dtype and shape, so a malformed message is a WireError, never an object.
"""
from __future__ import annotations

import json
import os
import struct

MAX_JSON = 4 << 20              # bytes of one message's JSON part
MAX_RAW = 256 << 20             # bytes of one message's tensors
MAX_TENSORS = 4096            # an op record of a forward pass (modelrecord.Ops) carries a few per op
MAX_DIMS = 8
DTYPES = ("float16", "bfloat16", "float32", "float64", "bool", "uint8", "int8", "int16", "int32", "int64")
HEAD = struct.Struct(">IQ")


class WireError(Exception):
    """A message that does not follow the format (or breaks a limit)."""


def _enc(x, out: list):
    import torch
    if isinstance(x, torch.Tensor):
        out.append(x)
        return {"$t": len(out) - 1}
    if type(x).__module__ == "numpy" and type(x).__name__ == "ndarray":
        out.append(torch.from_numpy(x.copy()) if x.dtype.kind in "biuf" else torch.as_tensor(x.tolist()))
        return {"$np": len(out) - 1}
    if type(x).__module__ == "numpy" and hasattr(x, "item"):          # a numpy scalar
        return x.item()
    if isinstance(x, tuple):
        return {"$tuple": [_enc(v, out) for v in x]}
    if isinstance(x, list):
        return [_enc(v, out) for v in x]
    if isinstance(x, dict):
        return {"$dict": [[str(k), _enc(v, out)] for k, v in x.items()]}
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, Handle):
        return {"$h": x.n}
    raise WireError(f"a {type(x).__name__} cannot be sent (only tensors, arrays, numbers, strings, lists)")


class Handle:
    def __init__(self, n: int):
        self.n = n


def write(fd: int, obj: dict) -> None:
    """Send one message (obj's tensors by value)."""
    tensors: list = []
    doc = _enc(obj, tensors)
    metas, parts, off = [], [], 0
    for t in tensors:
        t = t.detach().to("cpu").contiguous()
        if str(t.dtype).replace("torch.", "") not in DTYPES:
            t = t.float() if t.is_floating_point() or t.is_complex() else t.long()
        raw = t.view(-1).view(__import__("torch").uint8).numpy().tobytes() if t.numel() else b""
        metas.append({"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "offset": off,
                      "nbytes": len(raw)})
        parts.append(raw)
        off += len(raw)
    doc = {"body": doc, "tensors": metas}
    text = json.dumps(doc).encode()
    if len(text) > MAX_JSON or off > MAX_RAW:
        raise WireError(f"a message of {len(text) + off} bytes is over the limit")
    _send_all(fd, HEAD.pack(len(text), off) + text)
    for raw in parts:
        _send_all(fd, raw)


def _send_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view[:1 << 20])
        view = view[n:]


def _recv(fd: int, n: int, deadline: float | None) -> bytes:
    import select
    import time
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError("no answer in time")
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the connection")
        buf += chunk
    return bytes(buf)


def read(fd: int, deadline: float | None = None) -> dict:
    """One message, checked: its sizes, every tensor's dtype, shape and byte count; tensors rebuilt by value."""
    import torch
    nj, nr = HEAD.unpack(_recv(fd, HEAD.size, deadline))
    if nj > MAX_JSON or nr > MAX_RAW:
        raise WireError(f"a message of {nj} + {nr} bytes is over the limit")
    try:
        doc = json.loads(_recv(fd, nj, deadline).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise WireError(f"not JSON: {str(e)[:200]}") from None
    raw = _recv(fd, nr, deadline) if nr else b""
    metas = doc.get("tensors") if isinstance(doc, dict) else None
    if not isinstance(metas, list) or len(metas) > MAX_TENSORS or "body" not in doc:
        raise WireError("no tensor list, or too many tensors")
    tensors = []
    for m in metas:
        if not isinstance(m, dict) or m.get("dtype") not in DTYPES:
            raise WireError(f"a tensor of an unknown dtype: {str(m)[:100]}")
        shape, off, nb = m.get("shape"), m.get("offset"), m.get("nbytes")
        if not (isinstance(shape, list) and len(shape) <= MAX_DIMS and all(type(s) is int and 0 <= s < 2 ** 31
                                                                            for s in shape)):
            raise WireError("a tensor's shape is not a list of sizes")
        dtype = getattr(torch, m["dtype"])
        count = 1
        for s in shape:
            count *= s
        size = count * torch.empty((), dtype=dtype).element_size()
        if type(off) is not int or type(nb) is not int or nb != size or off < 0 or off + nb > len(raw):
            raise WireError("a tensor's bytes do not match its shape")
        flat = torch.frombuffer(bytearray(raw[off:off + nb]), dtype=torch.uint8) if nb else torch.empty(0,
                                                                                                        dtype=torch.uint8)
        tensors.append(flat.view(dtype).reshape(shape) if nb else torch.empty(shape, dtype=dtype))
    return _dec(doc["body"], tensors, 0)


def _dec(x, tensors: list, depth: int):
    if depth > 32:
        raise WireError("nested too deep")
    if isinstance(x, list):
        return [_dec(v, tensors, depth + 1) for v in x]
    if isinstance(x, dict):
        if len(x) == 1:
            (k, v), = x.items()
            if k in ("$t", "$np"):
                if type(v) is not int or not 0 <= v < len(tensors):
                    raise WireError("a tensor reference out of range")
                return tensors[v] if k == "$t" else tensors[v].numpy()
            if k == "$tuple" and isinstance(v, list):
                return tuple(_dec(i, tensors, depth + 1) for i in v)
            if k == "$dict" and isinstance(v, list):
                return {str(p[0]): _dec(p[1], tensors, depth + 1) for p in v if isinstance(p, list) and len(p) == 2}
            if k == "$h":
                if type(v) is not int:
                    raise WireError("a handle is not a number")
                return Handle(v)
        return {str(k): _dec(v, tensors, depth + 1) for k, v in x.items()}
    return x
