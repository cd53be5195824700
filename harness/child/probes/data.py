"""The student's make_batch: tgt is SOS + reversed(src) + EOS, padded with PAD."""
from __future__ import annotations

import ast

import torch

from . import locate
from .base import check, manual_seed
from .common import EOS, PAD, SOS


def make_batch(ctx):
    fn = ctx.need("make_batch")
    manual_seed(ctx.seed)
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
                  "every target = SOS + reversed(source) + EOS, then PAD", detail, location=ctx.where(line)),
            _digits(ctx, fn, src)]


# Eight batches of 32 sources of 4-10 digits: ~1,800 digits, ~180 of each. A digit the sampler can draw
# at all is missing from them with probability (1 - p)^1800: below 1e-8 unless p < 1%, a tenth of uniform.
DIGIT_BATCHES = 8


def _digits(ctx, fn, first):
    """Every digit 0-9 appears in the sources: a sampler whose upper bound is exclusive (numpy's or torch's
    randint(0, 9)) never draws 9, and the model never learns to emit it."""
    srcs = [first]
    with ctx.student("make_batch(32)"):
        for _ in range(DIGIT_BATCHES - 1):
            srcs.append(fn(32)[0])
    tokens = torch.cat([s[s != PAD].flatten() for s in srcs])               # (n_digits,)
    if tokens.numel() == 0:          # nothing to count: not evidence that digits are missing
        return check("data-digits", "skip", None, "every digit 0-9 in the sources",
                     "make_batch's sources hold no tokens other than PAD: the digits could not be counted")
    counts = torch.bincount(tokens.clamp(0, 12), minlength=13)[:10]          # (10,) digits 0-9
    missing = [d for d in range(10) if int(counts[d]) == 0]
    ok = not missing
    line = _sampler_line(ctx, missing) if missing else None
    return check("data-digits", "pass" if ok else "fail", {"missing": missing, "counts": counts.tolist()},
                 "every digit 0-9 in the sources", f"digit counts over {DIGIT_BATCHES} batches of 32 sources "
                 f"({tokens.numel()} digits)" + (f"; never drawn: {missing}" if missing else ""),
                 data={"missing": missing, "sampler_line": line}, location=ctx.where(line))


def _sampler_line(ctx, missing):
    """The random-integer call in make_batch: the one whose literal upper bound is the largest missing digit
    (an exclusive bound written as if inclusive) if there is one, else the first."""
    tree = ast.parse(ctx.source.text)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "make_batch":
            calls = [c for c in ast.walk(node) if isinstance(c, ast.Call) and
                     (getattr(c.func, "attr", "") or getattr(c.func, "id", "")) in
                     ("randint", "integers", "randrange", "choice", "multinomial", "random_")]
            bound = [c for c in calls if any(isinstance(a, ast.Constant) and a.value == max(missing)
                                             for a in c.args)]
            return (bound or calls or [node])[0].lineno
    return None


def _written(node: ast.AST, var: str) -> list[ast.Assign]:
    """The assignments in `node` into a subscript of `var` (`var[i, 1:n + 1] = ...`), in line order."""
    out = [a for a in ast.walk(node) if isinstance(a, ast.Assign) and any(
        isinstance(t, ast.Subscript) and locate.root_name(t) == var for t in a.targets)]
    return sorted(out, key=lambda a: a.lineno)


def _body_write(fn: ast.FunctionDef) -> int | None:
    """The statement that writes the target's body: make_batch returns (src, tgt); of the writes into tgt, the
    one whose value reads a name that is also written into src (the digits themselves, flipped or not), or src."""
    ret = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple)]
    if not ret or len(ret[-1].value.elts) < 2:
        return None
    src_var, tgt_var = (locate.root_name(e) for e in ret[-1].value.elts[:2])
    if not src_var or not tgt_var:
        return None
    made = _written(fn, src_var) + [a for a in ast.walk(fn) if isinstance(a, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == src_var for t in a.targets)]
    digits = {n.id for a in made for n in ast.walk(a.value) if isinstance(n, ast.Name)} | {src_var}
    for a in _written(fn, tgt_var):
        names = {n.id for n in ast.walk(a.value) if isinstance(n, ast.Name)}
        if names & digits:
            return a.lineno
        order = _order_line(fn, a, digits)
        if order:
            return order
    return None


GATHERS = ("gather", "index_select", "take_along_dim", "take")


def _order_line(fn: ast.FunctionDef, write: ast.Assign, digits: set, depth: int = 4) -> int | None:
    """A vectorised make_batch writes the target's body from a variable made from the digits by an index
    (torch.gather(digits, 1, rev_idx), digits[:, rev_idx]): walking back through the plain assignments from the
    write, the statement that makes that index is where the order is chosen (a reversal by the batch's length
    instead of each row's own is wrong there, not where it is copied)."""
    value, before, var = write.value, write.lineno, None
    for _ in range(depth):
        made_as = var
        var = locate.root_name(value) if not isinstance(value, ast.Call) or not _is_gather(value) else None
        if isinstance(value, ast.Call) and not _is_gather(value):
            # rev = torch.where(real, rev, PAD): follow the variable being remade, else the first plain name
            # argument made earlier
            names = [a.id for a in value.args if isinstance(a, ast.Name) and a.id not in digits
                     and locate.assignment_of(fn, a.id, before)]
            var = made_as if made_as in names else next(iter(names), None)
        if _is_gather(value) or (isinstance(value, ast.Subscript) and locate.root_name(value) in digits):
            index = [n.id for n in ast.walk(value) if isinstance(n, ast.Name) and n.id not in digits
                     and n.id not in ("torch",)]
            lines = [locate.assignment_of(fn, n, before) for n in index]
            lines = [ln for ln in lines if ln]
            return max(lines) if lines else before
        if not var:
            return None
        line = locate.assignment_of(fn, var, before)
        node = next((a for a in ast.walk(fn) if isinstance(a, ast.Assign) and a.lineno == line), None)
        if node is None:
            return None
        value, before = node.value, node.lineno
    return None


def _is_gather(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) in GATHERS


def _assign_line(ctx):
    """The line in make_batch that writes the body of the target."""
    tree = ast.parse(ctx.source.text)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "make_batch":
            body = _body_write(node)
            if body:
                return body
            for sub in ast.walk(node):
                if isinstance(sub, ast.Assign) and isinstance(sub.targets[0], ast.Subscript) and \
                        isinstance(sub.value, (ast.Name, ast.Call, ast.Subscript)) and \
                        "seq" in ast.unparse(sub.value) or (isinstance(sub, ast.Assign) and "flip" in ast.unparse(sub)):
                    if isinstance(sub.targets[0], ast.Subscript) and ast.unparse(sub.targets[0]).startswith("tgt"):
                        return sub.lineno
            return node.lineno
    return None
