"""The student's make_batch: tgt is SOS + reversed(src) + EOS, padded with PAD."""
from __future__ import annotations

import ast

import torch

from .base import check
from .common import EOS, PAD, SOS


def make_batch(ctx):
    fn = ctx.need("make_batch")
    torch.manual_seed(ctx.seed)
    with ctx.student("make_batch(32)"):
        src, tgt = fn(32)
    n, rev, copy, brackets, pads = 0, 0, 0, 0, 0
    for i in range(src.size(0)):
        s = src[i]
        L = int((s != PAD).sum())
        seq = s[:L]
        t = tgt[i]
        if t.numel() < L + 2:
            continue
        n += 1
        rev += bool(torch.equal(t[1:L + 1], seq.flip(0)))
        copy += bool(torch.equal(t[1:L + 1], seq))
        brackets += int(t[0]) == SOS and int(t[L + 1]) == EOS
        pads += bool((t[L + 2:] == PAD).all()) and bool((s[L:] == PAD).all())
    ok = n > 0 and rev == n and brackets == n and pads == n
    detail = f"{rev}/{n} targets are the reversed source, {copy}/{n} are a copy, " \
             f"{brackets}/{n} bracketed by SOS/EOS, {pads}/{n} padded with PAD"
    line = None
    if not ok:
        line = _assign_line(ctx)
    return [check("data", "pass" if ok else "fail", {"reversed": rev, "copied": copy, "bracketed": brackets,
                                                       "padded": pads, "n": n},
                  "every target = SOS + reversed(source) + EOS, then PAD", detail, location=ctx.where(line))]


def _assign_line(ctx):
    """The line in make_batch that writes the body of the target."""
    tree = ast.parse(ctx.source.text)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "make_batch":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Assign) and isinstance(sub.targets[0], ast.Subscript) and \
                        isinstance(sub.value, (ast.Name, ast.Call, ast.Subscript)) and \
                        "seq" in ast.unparse(sub.value) or (isinstance(sub, ast.Assign) and "flip" in ast.unparse(sub)):
                    if isinstance(sub.targets[0], ast.Subscript) and ast.unparse(sub.targets[0]).startswith("tgt"):
                        return sub.lineno
            return node.lineno
    return None
