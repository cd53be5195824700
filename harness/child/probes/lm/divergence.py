"""Where a failing `lm` component goes wrong: the first of the student's values the reference never computes.

The student's adapter and the reference's run on the same failing input (same weights), each under a
torch-function recorder that keeps every op's output, its tensor inputs (by identity, for the data flow)
and the stack of lines in its own files. A student value "matches" when some reference value has the
same numbers (same shape, or the same shape with its axes permuted). Walking back from the student's
wrong output through values that match nothing, the earliest op whose inputs all match is where the
wrong numbers start: right values in, wrong values out. Style differences (rsqrt instead of 1 / sqrt)
make values that match nothing too, but their chain ends at a matching value before the output, so
they are never on the path walked.

When that op's input is a value the reference went on to transform with a different op (the student
skipped a step: no scaling, no residual, no transpose), the step was due where that input was made:
at the reference's call depth of the skipped op, in the student's stack of the op that made it.
Cheap: one extra forward of each side on the (small) failing case; only for failing components."""
from __future__ import annotations

import itertools
import linecache
import re
import sys

import torch

from ...recorder import Op, Recorder, tensors_in


def recorder(files: dict, limit: int = 3000) -> Recorder:
    """Every torch call whose innermost traced frame is in `files` (path that runs -> path shown), with copies of
    its tensor outputs (0-d ones too), its tensor inputs by identity and eight frames of its stack."""
    return Recorder(files, depth=8, limit=limit, outputs="copies", all_tensors=True, inputs="identity")


def record(files: dict, fn, args: tuple, numbers: bool = False):
    """(recorder, returned value or None) of fn(*args) under a Recorder; an exception ends the run.

    numbers: also keep every plain number a line of `files` assigns (an optimizer's step size), with how
    many ops had run: an op given a wrong number is then located where that number was made."""
    rec = recorder(files)
    result = None
    old = sys.gettrace()
    if numbers:
        sys.settrace(_number_tracer(files, lambda shown, line, v: rec.numbers.append((shown, line, v,
                                                                                         len(rec.ops)))))
    try:
        with torch.no_grad(), rec:
            result = fn(*args)
    except Exception:                  # noqa: BLE001 - the ops recorded so far are still evidence
        result = None
    finally:
        sys.settrace(old)
    return rec, result


def inputs_of(args) -> list:
    """The tensors among an adapter's arguments (state dicts' values too): values the reference has as well."""
    out = tensors_in(list(args))
    for a in args:
        if isinstance(a, dict):
            out.extend(v for v in a.values() if isinstance(v, torch.Tensor))
    return out


# -- matching values ---------------------------------------------------------------------------------
def _close(a: torch.Tensor, b: torch.Tensor, rtol: float) -> bool:
    if a.shape != b.shape:
        return False
    if not a.is_floating_point() or not b.is_floating_point():
        return not a.is_floating_point() and not b.is_floating_point() and bool((a == b).all())
    a, b = a.double(), b.double()
    fa, fb = torch.isfinite(a), torch.isfinite(b)
    if not bool((fa == fb).all()):
        return False
    if not bool(fa.all()):           # NaN where NaN, the same infinities
        na, nb = torch.isnan(a), torch.isnan(b)
        if not bool((na == nb).all()) or not bool((a[~fa & ~na] == b[~fb & ~nb]).all()):
            return False
    if not bool(fa.any()):
        return True
    scale = float(b[fb].abs().max())
    return float((a[fa] - b[fb]).abs().max()) <= rtol * max(scale, 1e-6) + 1e-9


class Index:
    """The reference's values, bucketed by sorted shape, for 'does the reference compute this anywhere?'."""

    def __init__(self, ops: list[Op], inputs: list, rtol: float):
        self.rtol, self.buckets = rtol, {}
        for op in ops:
            for t in op.outs if not op.passes_on else ():     # a passed-on value is indexed where it was made
                self._add(t, op.index)
        for t in inputs:
            self._add(t.detach(), None)

    def _add(self, t, where):
        self.buckets.setdefault(tuple(sorted(t.shape)), []).append((t, where))

    def find(self, t: torch.Tensor):
        """(True, reference op index or None for an input) when some reference value equals t, else (False, None).
        The same shape is preferred to a permutation of the axes; the latest such value to earlier ones."""
        bucket = self.buckets.get(tuple(sorted(t.shape)), [])
        for r, where in reversed(bucket):
            if r.shape == t.shape and _close(t, r, self.rtol):
                return True, where
        if t.dim() <= 4:                # the same values with the axes in another order (a layout choice)
            for r, where in reversed(bucket):
                if r.shape != t.shape and any(tuple(t.shape[p] for p in perm) == tuple(r.shape) and
                                              _close(t.permute(perm), r, self.rtol)
                                              for perm in itertools.permutations(range(t.dim()))):
                    return True, where
        return False, None


def first_divergence(student: Recorder, result, reference: Recorder, inputs: list, rtol: float = 1e-4,
                     passing: frozenset = frozenset(), expected=None):
    """{file, line, op, how} where the student's wrong output starts, or None when it cannot be told.

    passing: (file, line) of the student's lines that ran for components that pass: such a line is not
    where the bug is, the line that calls its function (with other arguments) is.
    expected: the reference's output on the same input (an output equal to it has no divergence)."""
    ops = student.ops
    if not ops:
        return None
    index = Index(reference.ops, inputs, rtol)
    matched = {op.index: index.find(op.outs[0]) if op.outs else (True, None) for op in ops}
    sink = student.producer.get(id(result)) if isinstance(result, torch.Tensor) else None
    if sink is None:
        bad = [i for i, (ok, _) in matched.items() if not ok]
        sink = bad[-1] if bad else None
    if sink is None:
        return None
    if isinstance(result, torch.Tensor) and isinstance(expected, torch.Tensor) and \
            _close(result.detach(), expected.detach(), rtol):
        return None               # right on this input
    if matched[sink][0]:          # the output is a value the reference computes on the way: steps were skipped
        where = _skipped_after(student, sink, None, matched, reference)
        return None if where is None else _found(where, ops[sink], "stops early after", ops, passing)
    seen, todo, roots = set(), [sink], []
    while todo:                   # walk back from the output through values the reference never computes
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        bad_inputs = [p for p in ops[i].made_by if p is not None and p < i and not matched[p][0]]
        if bad_inputs:
            todo.extend(bad_inputs)
        else:
            roots.append(i)
    root = ops[min(roots)]
    named = _misnamed(student, root, matched, reference)
    if named is not None:             # right values, paired wrongly: made under the other value's name
        return _found(named.stack[0], named, "makes a value the reference has, under the name the reference "
                      "gives another (used wrongly paired at used_at)", ops, passing) | \
            {"used_at": {"file": root.stack[0][0], "line": root.stack[0][1], "op": root.name}}
    for p in root.made_by:
        if p is not None and p < root.index and matched[p][0]:
            where = _skipped_after(student, p, root, matched, reference)
            if where is not None:
                return _found(where, root, "skips a step after", ops, passing)
    made = _number_origin(student, root, reference)
    if made is not None:              # right tensors in, a number the reference never gives this op
        return _found(made, root, "is given a number the reference does not give it, made", ops, passing)
    return _found(root.stack[0], root, "computes", ops, passing)


def _same_number(a: float, b: float, rtol: float = 1e-9) -> bool:
    return abs(a - b) <= rtol * max(1.0, abs(b))


def _number_origin(student: Recorder, root: Op, reference: Recorder):
    """Where the number an op was given was made, when no reference op of that name is given it."""
    same = _same_number
    theirs = [op.scalars for op in reference.ops if op.name == root.name]
    if not root.scalars or not student.numbers or not theirs:
        return None
    for x in root.scalars:
        if x == 0 or any(any(same(x, y) for y in ys) for ys in theirs):
            continue
        for shown, line, v, n in reversed(student.numbers):     # the last line before the op that made it
            if n <= root.index and v != 0 and (same(v, x) or same(-v, x)):
                return (shown, line, None, None)
    return None


def _origin(rec: Recorder, i):
    """The op that made the value op i passes on (.to, .contiguous): where the value was made."""
    while i is not None and rec.ops[i].passes_on and rec.ops[i].made_by and rec.ops[i].made_by[0] is not None \
            and rec.ops[i].made_by[0] < i:
        i = rec.ops[i].made_by[0]
    return i


def _misnamed(student: Recorder, root: Op, matched: dict, reference: Recorder, depth: int = 8):
    """The student's op that made a right value under a wrong name, when that explains the root; else None.

    The root's inputs are all values the reference computes, but no reference op of its name takes them
    together (`x1 * cos - x2 * sin` given the two products the reference adds). Going up the histories of the
    inputs that differ side by side with a reference op of the same name (the same op names: products,
    indexing, casts) to where the two differ (the student's `sin` where the reference has `cos`), that line
    either made the value under the name the reference gives the other (`register_buffer("cos",
    angles.sin())`: the bug is where it was made) or not (then the pairing is the bug, and None leaves the
    root blamed). Values alone cannot tell these two apart; the student's own name for the value does."""
    if not root.made_by or any(p is None or matched[p][1] is None for p in root.made_by):
        return None
    for r in reference.ops:
        if r.name == root.name and len(r.made_by) == len(root.made_by):
            found = _walk_up(student, root, r, matched, reference, depth)
            if found is not None:
                return found
    return None


def _walk_up(student: Recorder, S: Op, Q: Op, matched: dict, reference: Recorder, depth: int):
    """Where the histories of the student's S and the reference's Q (same op name) part, if a misnamed value."""
    if depth == 0 or len(S.made_by) != len(Q.made_by):
        return None
    for s, q in zip(S.made_by, Q.made_by):
        q = _origin(reference, q)
        if s is None or q is None or matched[s][1] is None or _origin(reference, matched[s][1]) == q:
            continue
        a, b = student.ops[_origin(student, s)], reference.ops[q]
        if a.name != b.name:
            if _line_names(student, a, b.name) and not _line_names(student, a, a.name):
                return a
            continue
        found = _walk_up(student, a, b, matched, reference, depth - 1)
        if found is not None:
            return found
    return None


def _line_names(rec: Recorder, op: Op, name: str) -> bool:
    """Whether the source line of op uses `name` as a name (a variable, a key: "cos"), not as a call (`.sin(`)."""
    running = next((k for k, v in rec.files.items() if v == op.stack[0][0]), None)
    text = linecache.getline(running, op.stack[0][1]) if running else ""
    return re.search(rf"\b{re.escape(name)}\b(?!\s*\()", text) is not None


def _found(where, op: Op, how: str, ops: list, passing) -> dict:
    """The location; a frame of a passing component's function is replaced by the first caller outside them."""
    stack = op.stack[[e[2] for e in op.stack].index(where[2]):] if where in op.stack else (where,)
    for e in stack:               # a line that ran for a component that passes: the line calling it is blamed
        if (e[0], e[1]) not in passing:
            where = e
            break
    return {"file": where[0], "line": where[1], "op": op.name, "how": how, "index": op.index, "ops": len(ops)}


# Ops that make the same step in different spellings: the student's einsum where the reference multiplies by
# the transposed weight is that step done (perhaps wrongly), not a step skipped.
PRODUCTS = {"matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "linear", "einsum", "tensordot", "mv"}


def _same_step(a: str, b: str) -> bool:
    return a == b or (a in PRODUCTS and b in PRODUCTS)


def _skipped_after(student: Recorder, p: int, root, matched: dict, reference: Recorder):
    """Where a step was due after the student's (matching) value p, when the reference went on to transform
    that value with an op the student did not apply (root: the student's next op, or None at the output)."""
    if matched[p][1] is None:
        return None
    while True:                   # back through ops that pass the same value on (.to, .contiguous): where it was made
        q = student.ops[p].made_by[0] if student.ops[p].made_by else None
        if q is None or q >= p or matched[q][1] != matched[p][1]:
            break
        p = q
    ref_op = reference.ops[matched[p][1]]
    nxt, todo = [], list(ref_op.consumers)
    while todo:                   # the reference's next steps, through its own pass-through ops
        c = reference.ops[todo.pop(0)]
        if c.passes_on:
            todo.extend(c.consumers)
        else:
            nxt.append(c)
    if not nxt or (root is not None and any(_same_step(c.name, root.name) for c in nxt)):
        return None
    made = student.ops[p].stack
    k = _common_depth(ref_op.stack, nxt[0].stack)
    x = ref_op.stack[k]
    y_line = next((e[1] for e in nxt[0].stack if e[2] == x[2]), x[1])
    frame = made[min(k, len(made) - 1)]
    if y_line == x[1] or root is None:
        return frame              # the reference's next step is on the same line as the value: due there
    same = [e for e in root.stack if e[2] == frame[2]]
    return same[0] if same else frame     # due on the student's next line in that function


def _common_depth(made: tuple, used: tuple) -> int:
    """How many frames up from `made`'s innermost is the deepest frame it shares with `used`."""
    tokens = {e[2] for e in used}
    for k, e in enumerate(made):
        if e[2] in tokens:
            return k
    return len(made) - 1


# -- plain numbers (the learning-rate schedule): the first line that makes a number the reference never makes --
def value_tracer(files: dict, values, emit, returns=None):
    """A sys.settrace function: emit(shown file, line, value) for every local of a frame of `files` that a
    line bound anew. values(frame) -> {name: (identity, value)}: a name whose identity changed was bound
    (a number's identity is itself; an array's is its id(), the value holding the object).
    returns(value) -> value or None: the frame's return value, emitted too."""
    last = {}

    def local(frame, event, arg):
        shown = files[frame.f_code.co_filename]
        line, before = last.get(id(frame), (None, {}))
        now = values(frame)
        if line is not None:
            for k, (ident, v) in now.items():
                if k not in before or before[k][0] != ident:
                    emit(shown, line, v)
        if event == "return":
            r = returns(arg) if returns else None
            if r is not None:
                emit(shown, frame.f_lineno, r)
            last.pop(id(frame), None)
        else:
            last[id(frame)] = (frame.f_lineno, now)
        return local

    def trace(frame, event, arg):
        if event == "call" and frame.f_code.co_filename in files:
            last[id(frame)] = (None, values(frame))
            return local
        return None
    return trace


def _numbers(frame) -> dict:
    return {k: (v, float(v)) for k, v in frame.f_locals.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _number(x):
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _number_tracer(files: dict, emit):
    """Every number a line of `files` assigned (a local that changed) or returned: emit(file, line, number)."""
    return value_tracer(files, _numbers, emit, returns=_number)


def run_traced(files: dict, values, fn, args: tuple = (), returns=None) -> tuple[list, list]:
    """([(shown file, line, value)] in order, [fn's result] or [] if it raised) of fn(*args) under value_tracer."""
    out, result = [], []
    old = sys.gettrace()
    sys.settrace(value_tracer(files, values, lambda shown, line, v: out.append((shown, line, v)), returns))
    try:
        result.append(fn(*args))
    except Exception:                  # noqa: BLE001 - the lines recorded so far are still evidence
        pass
    finally:
        sys.settrace(old)
    return out, result


def record_values(files: dict, fn, args: tuple) -> list:
    """[(shown file, line, number)]: every number a line of the student's files assigned or returned, in order."""
    return run_traced(files, _numbers, fn, args, returns=_number)[0]


def first_new_number(student: list, reference: list, args: tuple = (), rtol: float = 1e-9) -> dict | None:
    """{file, line} of the first number the student's code made that neither the reference made nor was given."""
    known = [v for _, _, v in reference] + [float(a) for a in args if isinstance(a, (int, float))]
    for shown, line, v in student:
        if not any(_same_number(v, r, rtol) for r in known):
            return {"file": shown, "line": line, "op": "=", "how": "computes", "value": v}
    return None
