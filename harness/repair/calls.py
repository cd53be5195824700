"""More small expression edits, on what a call builds or is given rather than on an axis or a mask.

A model trained as a deep copy of itself, an optimizer given one submodule's parameters, a flag tested for
`is not None` where its value was meant, a Sequential of Linears with no activation between them, one
module object repeated in a list, a log of a ratio that can be zero, a per-row tensor tiled in the wrong order
for the heads, a schedule's factor that multiplies in the learning rate again, a time-major table cut by a
batch-first input's batch axis. Each editor returns (kind, label, new
node) for a node of the diagnosed statement, like sites.py; the verifier decides.
"""
from __future__ import annotations

import libcst as cst

from .sites import _int, _name
from .sites import code as _code

OPTIMIZERS = {"SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "LBFGS"}
ACTIVATIONS = {"ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "LeakyReLU", "ELU", "Mish", "Softplus", "GLU"}
TINY = "1e-12"


def no_copy(node):
    """copy.deepcopy(model) -> model: the caller's object is the one trained (or returned)."""
    if isinstance(node, cst.Call) and _name(node.func) == "deepcopy" and len(node.args) == 1 and \
            node.args[0].keyword is None and not node.args[0].star:
        return [("no-copy", f"{_code(node.args[0].value)} itself, not a deep copy", node.args[0].value)]
    return []


def all_parameters(node):
    """optim.X(model.part.parameters(), ...) -> optim.X(model.parameters(), ...): the whole model trained."""
    if not (isinstance(node, cst.Call) and _name(node.func) in OPTIMIZERS and node.args):
        return []
    first = node.args[0].value
    if isinstance(first, cst.Call) and _name(first.func) in ("parameters", "named_parameters") and not first.args \
            and isinstance(first.func, cst.Attribute) and isinstance(first.func.value, cst.Attribute):
        whole = first.with_changes(func=first.func.with_changes(value=first.func.value.value))
        args = [node.args[0].with_changes(value=whole)] + list(node.args[1:])
        return [("all-parameters", f"{_code(whole)} instead of {_code(first)}", node.with_changes(args=args))]
    return []


def truthiness(node):
    """`flag is not None` -> `flag`, `flag is None` -> `not flag`: a False flag is not None."""
    if not (isinstance(node, cst.Comparison) and len(node.comparisons) == 1 and
            isinstance(node.comparisons[0].comparator, cst.Name) and node.comparisons[0].comparator.value == "None"):
        return []
    op, left = node.comparisons[0].operator, node.left
    if isinstance(op, cst.IsNot):
        return [("truthiness", f"{_code(left)} instead of {_code(node)}", left)]
    if isinstance(op, cst.Is):
        return [("truthiness", f"not {_code(left)} instead of {_code(node)}",
                 cst.UnaryOperation(operator=cst.Not(), expression=left))]
    return []


def activation(node):
    """nn.Sequential(nn.Linear(..), [nn.Dropout(..),] nn.Linear(..)): no nonlinearity between them, so one
    linear map; nn.ReLU() after the first Linear."""
    if not (isinstance(node, cst.Call) and _name(node.func) == "Sequential"):
        return []
    names = [_name(a.value.func) if isinstance(a.value, cst.Call) else "" for a in node.args]
    lin = [i for i, n in enumerate(names) if n == "Linear"]
    for i, j in zip(lin, lin[1:]):
        if not any(n in ACTIVATIONS for n in names[i + 1:j]):
            f = node.args[i].value.func
            prefix = _code(f.value) + "." if isinstance(f, cst.Attribute) else ""
            relu = cst.Arg(cst.parse_expression(f"{prefix}ReLU()"), comma=node.args[i].comma
                           if node.args[i].comma != cst.MaybeSentinel.DEFAULT else
                           cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            first = node.args[i].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args = list(node.args[:i]) + [first, relu] + list(node.args[i + 1:])
            return [("activation", f"{prefix}ReLU() between the two Linear layers", node.with_changes(args=args))]
    return []


def distinct(node):
    """[Layer(...)] * n -> [Layer(...) for _ in range(n)]: n layers, not one object n times."""
    if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply) and
            isinstance(node.left, cst.List) and len(node.left.elements) == 1 and
            isinstance(node.left.elements[0].value, cst.Call)):
        return []
    item = _code(node.left.elements[0].value)
    return [("distinct", f"{_code(node.right)} separate layers, not one object repeated",
             cst.parse_expression(f"[{item} for _ in range({_code(node.right)})]"))]


def finite_log(node):
    """torch.log(p / q) where p has exact zeros: 0 * log 0 is NaN; the argument clamped at a tiny value."""
    if not (isinstance(node, cst.Call) and _name(node.func) == "log" and len(node.args) == 1 and
            isinstance(node.args[0].value, cst.BinaryOperation) and isinstance(node.args[0].value.operator, cst.Divide)):
        return []
    inner = cst.parse_expression(f"({_code(node.args[0].value)}).clamp_min({TINY})")
    return [("finite-log", f"log of the ratio clamped at {TINY} (0 * log 0 is NaN)",
             node.with_changes(args=[node.args[0].with_changes(value=inner)]))]


def tile_order(node):
    """x.repeat(h, 1, 1) -> x.repeat_interleave(h, dim=0): h copies of each row in turn (row b at b*h ...
    b*h + h - 1, the order of heads split from (B, T, h, d) and of nn.MultiheadAttention's 3-D masks), not the
    whole batch h times over (row b at head*B + b), which gives each sequence another one's mask."""
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "repeat"
            and len(node.args) >= 2 and all(a.keyword is None and not a.star for a in node.args)
            and all(_int(a.value) == 1 for a in node.args[1:]) and _int(node.args[0].value) != 1):
        return []
    times = _code(node.args[0].value)
    new = cst.parse_expression(f"{_code(node.func.value)}.repeat_interleave({times}, dim=0)")
    return [("tile-order", f".repeat_interleave({times}, dim=0) instead of .repeat({times}, ...): each row's "
             f"copies next to each other", new)]


SCHEDULERS = {"LambdaLR": 1, "MultiplicativeLR": 1}       # class -> the position of its factor function


def _lr_name(node) -> bool:
    """A name that holds a learning rate by the usual spellings: lr, learning_rate, base_lr, lr_max ..."""
    return isinstance(node, cst.Name) and (node.value in ("lr", "learning_rate") or node.value.endswith("_lr") or
                                           node.value.startswith("lr_"))


def _without_lr(expr):
    """A product with one learning-rate factor, that factor dropped (`lr * a * b` -> `a * b`); None if none."""
    if not (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply)):
        return None
    if _lr_name(expr.left):
        return expr.right
    if _lr_name(expr.right):
        return expr.left
    inner = _without_lr(expr.left)
    return None if inner is None else expr.with_changes(left=inner)


def schedule_factor(node):
    """LambdaLR(opt, lambda s: lr * f(s)) -> LambdaLR(opt, lambda s: f(s)): the scheduler multiplies the
    optimizer's own lr by what the function returns (a factor), so a factor that multiplies in lr again makes
    the rate lr * lr (1e-3 -> 1e-6)."""
    if not (isinstance(node, cst.Call) and _name(node.func) in SCHEDULERS):
        return []
    pos = SCHEDULERS[_name(node.func)]
    for i, a in enumerate(node.args):
        if not ((a.keyword is None and i == pos) or (a.keyword is not None and a.keyword.value == "lr_lambda")):
            continue
        if isinstance(a.value, cst.Lambda) and (body := _without_lr(a.value.body)) is not None:
            fn = a.value.with_changes(body=body)
            args = list(node.args[:i]) + [a.with_changes(value=fn)] + list(node.args[i + 1:])
            return [("schedule-factor", f"the schedule's factor {_code(body)}, without the lr the optimizer already "
                     f"has", node.with_changes(args=args))]
    return []


def _first_axis_to_second(up):
    """`x.size(0)` -> `x.size(1)`, `x.shape[0]` -> `x.shape[1]`; None for anything else."""
    if isinstance(up, cst.Call) and isinstance(up.func, cst.Attribute) and up.func.attr.value == "size" and \
            len(up.args) == 1 and up.args[0].keyword is None and _int(up.args[0].value) == 0:
        return up.with_changes(args=[up.args[0].with_changes(value=cst.Integer("1"))])
    if isinstance(up, cst.Subscript) and isinstance(up.value, cst.Attribute) and up.value.attr.value == "shape" and \
            len(up.slice) == 1 and isinstance(up.slice[0].slice, cst.Index) and _int(up.slice[0].slice.value) == 0:
        return up.with_changes(slice=[up.slice[0].with_changes(slice=cst.Index(cst.Integer("1")))])
    return None


def time_major(node):
    """pe[:x.size(0)] -> pe[:x.size(1)].transpose(0, 1): a table kept time-major, (max_len, 1, d) as for (T, B, d)
    inputs, cut by the first axis of a batch-first (B, T, d) input - its batch - so each sequence gets the row of
    its batch index; cut by the time axis and turned batch-first, (1, T, d). One edit: either half alone fails."""
    if not (isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice)):
        return []
    sl = node.slice[0].slice
    up = _first_axis_to_second(sl.upper) if sl.lower is None and sl.step is None and sl.upper is not None else None
    if up is None:
        return []
    cut = node.with_changes(slice=[node.slice[0].with_changes(slice=sl.with_changes(upper=up))])
    return [("time-major", f"{_code(cut)}.transpose(0, 1): the table cut by the time axis, turned batch-first",
             cst.parse_expression(f"{_code(cut)}.transpose(0, 1)"))]


EDITORS = (no_copy, all_parameters, truthiness, activation, distinct, finite_log, tile_order, schedule_factor,
           time_major)
