"""Interface problems: the adapter and the student's module disagree about the contract.

In real repositories of this assignment the most common failure is not numerical: a state-dict
key named differently, adapter arguments in the wrong order, an adapter that returns None, a
layer with a bias the contract lacks, a tensor made with the token ids' integer dtype. These
are measured (the parent names them `interface-mismatch`) from the exception, the keys and the shapes on both sides (or,
when nothing raises, from the reference called with two of its arguments swapped giving the
student's numbers) and never as a numerical bug of the component.
"""
from __future__ import annotations

import inspect
import re

import torch

from .....readable import cut
from .inputs import ADAPTER, cases, difference, run_case, tolerance

_MISSING = re.compile(r'Missing key\(s\) in state_dict: ([^\n]*)')
_UNEXPECTED = re.compile(r'Unexpected key\(s\) in state_dict: ([^\n]*)')
_SIZE = re.compile(r"size mismatch for ([\w.]+): copying a param with shape torch\.Size\(\[([\d, ]*)\]\) from "
                   r"checkpoint, the shape in current model is torch\.Size\(\[([\d, ]*)\]\)")
_INTEGER = ("normal_expects_floating", "floating point", "not implemented for 'long'", "not implemented for 'int'",
            "can require gradients", "expected floating")


def _keys(text):
    return re.findall(r'"([^"]+)"', text)


def _finding(evidence, kind, **extra):
    """What was measured: the kind of interface problem and its evidence (its cause `interface-mismatch` and
    confidence are the parent's decision, harness/causes/lm_decide.py)."""
    return {"kind": kind, "evidence": evidence, **extra}


def recorded_args(component: str, draw: int = 0):
    """[(case, args as a positional tuple, call)] for components whose case calls the adapter once."""
    from .fingerprint import reference_fn
    ref = reference_fn(component)
    names = list(inspect.signature(ref).parameters)
    out = []
    for case, call in cases(component, draw):
        seen = []

        def record(*a, **k):
            seen.append(tuple(a) + tuple(k[n] for n in names[len(a):] if n in k))
            return ref(*seen[-1])
        try:
            call(record)
        except Exception:                                   # noqa: BLE001 - our reference on our inputs
            continue
        if len(seen) == 1:
            out.append((case, seen[0], call))
    return out, names


def _arg_values(args, names) -> dict:
    """Integer-valued scalar arguments: value -> argument name (for reading sizes in messages)."""
    vals = {}
    for n, a in zip(names, args):
        if isinstance(a, (int, float)) and not isinstance(a, bool) and float(a).is_integer():
            vals.setdefault(int(a), n)
    return vals


def from_exception(component: str, message: str, args=(), names=()) -> dict | None:
    """An interface finding from a raised exception's text ('raised KeyError: ...'), or None."""
    kind, _, text = message.removeprefix("raised ").partition(": ")
    low = text.lower()
    contract = [k for k in (args_state_keys(args))]
    missing = [k for m in _MISSING.findall(text) for k in _keys(m)]
    unexpected = [k for m in _UNEXPECTED.findall(text) for k in _keys(m)]
    if missing or unexpected:
        ev = []
        extra_bias = [k for k in missing if k.endswith(".bias") or k == "bias"]
        if extra_bias:
            ev.append(f"your module has parameter(s) {', '.join(extra_bias[:4])} that the contract does not have "
                      "(a layer created with bias=True; the assignment's layers have no bias)")
        for m, u in zip([k for k in missing if k not in extra_bias], unexpected):
            ev.append(f"the contract's key '{u}' has no place in your module, which names it '{m}'")
        rest_m = [k for k in missing if k not in extra_bias][len(unexpected):]
        rest_u = unexpected[len([k for k in missing if k not in extra_bias]):]
        if rest_m:
            ev.append(f"your module expects key(s) the contract does not give: {', '.join(rest_m[:4])}")
        if rest_u:
            ev.append(f"the contract's key(s) {', '.join(rest_u[:4])} are not parameters of your module")
        return _finding(ev, "state-dict-keys", missing=missing, unexpected=unexpected)
    sizes = _SIZE.findall(text)
    if sizes:
        values = _arg_values(args, names)
        ev = []
        for key, want, have in sizes[:3]:
            want = [int(s) for s in want.split(",") if s.strip()]
            have = [int(s) for s in have.split(",") if s.strip()]
            line = f"'{key}' is {tuple(want)} in the contract but {tuple(have)} in your module"
            swaps = [(values.get(a), values.get(b)) for a, b in zip(want, have) if a != b]
            swaps = [(a, b) for a, b in swaps if a and b and a != b]
            if swaps:
                line += "; " + ", ".join(f"the module got {b}'s value where {a} belongs" for a, b in swaps)
                line += " (arguments passed in the wrong order)"
            elif want == have[::-1]:
                line += " (its dimensions are swapped: constructed with the arguments in the wrong order)"
            ev.append(line)
        return _finding(ev, "shapes", sizes=sizes)
    sized = _size_from_scalar(text, args, names)
    if sized:
        return sized
    if kind == "KeyError":
        key = text.strip("'\"")
        near = [k for k in contract if k.endswith(key) or key.endswith(k)]
        hint = f"; the contract's key(s) {', '.join(near[:3])}" if near else \
            (f"; the contract's keys are {', '.join(contract[:4])}, ..." if contract else "")
        return _finding([f"your code looks up the key '{key}', which the weights given to "
                         f"{ADAPTER[component]} do not have{hint}"], "key-lookup")
    if any(t in low for t in _INTEGER):
        return _finding([f"{kind}: {cut(text, 200)} - a parameter or tensor was created with an integer dtype "
                         "(e.g. the token ids' dtype); parameters take the weights' floating dtype"], "integer-dtype")
    if "error(s) in loading state_dict" in low:
        return _finding([f"{kind}: {cut(text, 300)}"], "state-dict")
    if kind == "TypeError" and ("positional argument" in low or "unexpected keyword" in low or "got multiple" in low):
        return _finding([f"{kind}: {cut(text, 200)} - the adapter calls your code with arguments it does not take"],
                        "arguments")
    return None


# arguments that are never a tensor size: a size equal to one of them (or its half, as RoPE's d_k / 2
# pairs) means the argument was passed where a size belongs
_NOT_SIZES = ("theta", "rope_theta", "eps", "max_learning_rate", "min_learning_rate")


def _size_from_scalar(text, args, names) -> dict | None:
    sizes = {int(n) for n in re.findall(r"\b(\d+)\b", text)}
    for name, a in zip(names, args):
        if name not in _NOT_SIZES or isinstance(a, bool) or not isinstance(a, (int, float)):
            continue
        for size in sizes:
            for factor, how in ((1, ""), (0.5, " / 2")):
                if size > 2 and abs(size - a * factor) < 0.5:
                    return _finding([f"a tensor has size {size} = {name}{how} ({name} = {a:g}): {name} was used "
                                     "where a size belongs (arguments passed in the wrong order?)", cut(text, 200)],
                                    "swapped-arguments")
    return None


def args_state_keys(args):
    for a in args:
        if isinstance(a, dict) and all(isinstance(k, str) for k in a):
            return list(a)
    return []


def _swappable(args):
    """Pairs of argument positions whose values could be exchanged without a type error."""
    pairs = []
    for i in range(len(args)):
        for j in range(i + 1, len(args)):
            a, b = args[i], args[j]
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
                if a.shape == b.shape and a.dtype == b.dtype and not torch.equal(a, b):
                    pairs.append((i, j))
            elif (isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool)
                  and not isinstance(b, bool) and a != b):
                pairs.append((i, j))
    return pairs


def swapped_arguments(component: str, student_fn) -> dict | None:
    """The student's outputs equal the reference's with two arguments exchanged, on every case."""
    from .fingerprint import reference_fn
    ref = reference_fn(component)
    recorded, names = recorded_args(component)
    if not recorded:
        return None
    common = None
    for case, args, _ in recorded:
        pairs = set(_swappable(args))
        common = pairs if common is None else common & pairs
    for i, j in sorted(common or ()):
        worst, numeric = 0.0, False
        for case, args, _ in recorded:
            mine = run_case(lambda f: f(*args), student_fn)
            a = list(args)
            a[i], a[j] = a[j], a[i]
            theirs = run_case(lambda f: f(*a), ref)
            plain = run_case(lambda f: f(*args), ref)
            d = difference(mine, theirs)
            if d is None or d > tolerance(component, case, theirs):
                break
            dp = difference(theirs, plain)
            numeric |= dp is not None and dp > tolerance(component, case, plain)
            worst = max(worst, d)
        else:
            if numeric:
                return _finding([f"equals the reference called with {names[i]} and {names[j]} exchanged, to "
                                 f"{worst:.1g} on {len(recorded)} case(s): {ADAPTER[component]} passes "
                                 f"{names[j]} where {names[i]} belongs"], "swapped-arguments")
    return None


def output_problems(component: str, outputs: list) -> dict | None:
    """The adapter returned None, or a tensor of an integer dtype where the contract has floats."""
    for case, out in outputs:
        if out == "returned None":
            return _finding([f"{ADAPTER[component]} returned None on '{case}' (the result is computed but not "
                             "returned)"], "returned-none")
    return None


def raw_dtype(component: str, student_fn) -> dict | None:
    """Output dtype against the contract: floats from the weights' dtype, int64 batches from get_batch."""
    case, call = cases(component, 0)[0]
    got = []

    def keep(*a, **k):
        got.append(student_fn(*a, **k))
        return got[-1]
    try:
        call(keep)
    except Exception:                                       # noqa: BLE001 - reported elsewhere
        pass
    for out in got:
        outs = out if isinstance(out, (list, tuple)) else [out]
        for t in outs:
            if not isinstance(t, torch.Tensor):
                continue
            if component == "get_batch" and t.dtype != torch.long:
                return _finding([f"run_get_batch returned {t.dtype} tensors; the contract's batches are int64 "
                                 "(LongTensor), which embedding lookups and cross-entropy targets need"], "dtype")
            if component not in ("get_batch",) and not (t.is_floating_point() or t.is_complex()):
                return _finding([f"{ADAPTER[component]} returned a {t.dtype} tensor on '{case}'; the contract's "
                                 "output has the weights' floating dtype (a tensor created with the token ids' "
                                 "dtype?)"], "dtype")
    return None


def zero_in_zero_out(component: str, student_fn) -> dict | None:
    """A bias-free linear map sends 0 to 0: a nonzero output at zero input is a bias the contract lacks."""
    if component not in ("linear", "swiglu"):
        return None
    recorded, names = recorded_args(component)
    if not recorded:
        return None
    case, args, _ = recorded[0]
    idx = names.index("in_features")
    a = list(args)
    a[idx] = torch.zeros_like(a[idx])
    out = run_case(lambda f: f(*a), student_fn)
    if isinstance(out, str):
        return None
    size = max(float(t.abs().max()) for t in out if t.numel())
    if size > 1e-6:
        return _finding([f"{ADAPTER[component]} on an all-zero input returns values up to {size:.3g} "
                         "instead of 0: a bias term the contract does not have (layers are y = W x)"],
                        "bias")
    return None
