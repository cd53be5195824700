"""Small expression edits at one statement of the student's file, as LibCST node replacements.

Each editor looks at one node of the statement that holds the diagnosed line and returns (kind, label,
new node) for every small change it knows for that node: the axis of a softmax or a reduction, triu <-> tril
and a diagonal's offset, a comparison's polarity, -inf -> a finite minimum, the missing scale of a score
product, a transpose before a heads merge, a slice or an index moved by one. Nothing here runs code: the
verifier (verify.py) decides which edit, if any, is a repair.
"""
from __future__ import annotations

import libcst as cst


def code(node) -> str:
    """The source text of a node (a repair's label and the text an edit is built from)."""
    return cst.Module([]).code_for_node(node)


REDUCTIONS = {"mean", "var", "std", "sum", "norm", "amax", "amin", "logsumexp", "max", "min", "cumsum"}
SOFTMAXES = {"softmax", "log_softmax"}
SOFTMAX_MODULES = {"Softmax", "LogSoftmax"}      # nn.Softmax(dim=...): the axis fixed when the module is built
FINITE_MIN = "-1e9"


def _name(func) -> str:
    """The called function's last name: torch.softmax -> softmax, x.view -> view."""
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return ""


def _int(node) -> int | None:
    """An integer literal's value (-1 included), else None."""
    if isinstance(node, cst.Integer):
        return int(node.value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and \
            isinstance(node.expression, cst.Integer):
        return -int(node.expression.value)
    return None


def _lit(v: int) -> cst.BaseExpression:
    return cst.parse_expression(str(v))


def _arg(call: cst.Call, keyword: str, position: int | None):
    """(index, Arg) of a keyword argument, or of the positional one at `position`."""
    for i, a in enumerate(call.args):
        if a.keyword is not None and a.keyword.value == keyword:
            return i, a
    if position is not None:
        pos = [(i, a) for i, a in enumerate(call.args) if a.keyword is None and not a.star]
        if len(pos) > position:
            return pos[position]
    return None, None


def _set_arg(call: cst.Call, i: int, value) -> cst.Call:
    args = list(call.args)
    args[i] = args[i].with_changes(value=value)
    return call.with_changes(args=args)


def _add_kw(call: cst.Call, keyword: str, value: str) -> cst.Call:
    args = list(call.args)
    if args and args[-1].comma == cst.MaybeSentinel.DEFAULT:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(cst.Arg(keyword=cst.Name(keyword), value=cst.parse_expression(value),
                        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                              whitespace_after=cst.SimpleWhitespace(""))))
    return call.with_changes(args=args)


def softmax_axis(node):
    """softmax(x, dim=k) -> dim=-1: the keys are the last axis in every course layout. Also the module built
    with its axis, nn.Softmax(dim=k) (edit.constructed finds it from the call of the module)."""
    if not isinstance(node, cst.Call) or _name(node.func) not in SOFTMAXES | SOFTMAX_MODULES:
        return []
    method = isinstance(node.func, cst.Attribute) and _name(node.func.value) not in ("F", "torch", "functional", "nn")
    i, a = _arg(node, "dim", 0 if method or _name(node.func) in SOFTMAX_MODULES else 1)
    k = _int(a.value) if a is not None else None
    if k is None:
        return []
    to = -2 if k == -1 else -1      # -2: scores laid out (keys, queries), softmax over the keys
    return [("softmax-axis", f"softmax over dim={to} instead of dim={k}", _set_arg(node, i, _lit(to)))]


def unwrap_softmax(node):
    """softmax(x) -> x: a second normalisation of weights that already are one (attention-renormalised)."""
    if not isinstance(node, cst.Call) or _name(node.func) not in SOFTMAXES:
        return []
    method = isinstance(node.func, cst.Attribute) and _name(node.func.value) not in ("F", "torch", "functional", "nn")
    inner = node.func.value if method else (node.args[0].value if node.args else None)
    return [("unwrap", "without this softmax (the weights are normalised already)", inner)] if inner is not None else []


def reduction_axis(node):
    """mean/var/std/...(dim=k) -> dim=-1: a normalisation over the features, not the batch or the sequence."""
    if not isinstance(node, cst.Call) or _name(node.func) not in REDUCTIONS or not isinstance(node.func, cst.Attribute):
        return []
    i, a = _arg(node, "dim", 0 if _name(node.func.value) != "torch" else 1)
    if a is None or _int(a.value) in (-1, None):
        return []
    return [("reduction-axis", f"{_name(node.func)} over dim=-1 instead of dim={_int(a.value)}",
             _set_arg(node, i, _lit(-1)))]


def triangle(node):
    """triu <-> tril, a diagonal's offset by one, and both at once (a mask of the other convention)."""
    if not isinstance(node, cst.Call) or _name(node.func) not in ("triu", "tril"):
        return []
    other = "tril" if _name(node.func) == "triu" else "triu"
    func = node.func.with_changes(attr=cst.Name(other)) if isinstance(node.func, cst.Attribute) else cst.Name(other)
    method = isinstance(node.func, cst.Attribute) and _name(node.func.value) != "torch"
    i, a = _arg(node, "diagonal", 0 if method else 1)
    k = _int(a.value) if a is not None else 0
    out = [("triangle", f"torch.{other} instead of torch.{_name(node.func)}", node.with_changes(func=func))]
    if a is None:
        for d in (1, -1):
            out.append(("diagonal", f"diagonal={d} (the diagonal itself was kept as it was)",
                        _add_kw(node, "diagonal", str(d))))
        out.append(("triangle", f"torch.{other}(diagonal=0) for torch.{_name(node.func)}",
                    node.with_changes(func=func)))
    elif k is not None:
        for d in (k - 1, k + 1):
            out.append(("diagonal", f"diagonal={d} instead of {k}", _set_arg(node, i, _lit(d))))
        if k != 0:
            out.append(("triangle", f"torch.{other}(diagonal={-k}) instead of torch.{_name(node.func)}(diagonal={k})",
                        _set_arg(node.with_changes(func=func), i, _lit(-k))))
        out.append(("triangle", f"torch.{other}(diagonal=0) instead of torch.{_name(node.func)}(diagonal={k})",
                    _set_arg(node.with_changes(func=func), i, _lit(0))))
    return out


def polarity(node):
    """== <-> != in a comparison, and a mask's ~ removed: a mask that keeps what it should drop."""
    out = []
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        op = node.comparisons[0].operator
        flip = {cst.Equal: cst.NotEqual, cst.NotEqual: cst.Equal}.get(type(op))
        if flip is not None:
            new = node.comparisons[0].with_changes(operator=flip(whitespace_before=op.whitespace_before,
                                                                 whitespace_after=op.whitespace_after))
            out.append(("polarity", f"{'!=' if flip is cst.NotEqual else '=='} instead of "
                        f"{'==' if flip is cst.NotEqual else '!='}", node.with_changes(comparisons=[new])))
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.BitInvert):
        out.append(("polarity", "the mask without ~", node.expression))
    if isinstance(node, cst.Call) and _name(node.func) in ("masked_fill", "masked_fill_"):
        i, a = _arg(node, "mask", 0)
        if a is not None and not (isinstance(a.value, cst.UnaryOperation) and isinstance(a.value.operator, cst.BitInvert)) \
                and not isinstance(a.value, cst.Comparison):
            inv = cst.UnaryOperation(operator=cst.BitInvert(), expression=a.value if isinstance(
                a.value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) else a.value.with_changes(
                lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))
            out.append(("polarity", "masked_fill with the mask's complement (~mask)", _set_arg(node, i, inv)))
    return out


def _is_neg_inf(node) -> bool:
    if isinstance(node, cst.Call) and _name(node.func) == "float" and len(node.args) == 1 and \
            isinstance(node.args[0].value, cst.SimpleString):
        return node.args[0].value.evaluated_value.strip().lower() in ("-inf", "-infinity")
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        e = node.expression
        if isinstance(e, cst.Attribute) and e.attr.value == "inf":
            return True
        if isinstance(e, cst.Call) and _name(e.func) == "float" and len(e.args) == 1 and \
                isinstance(e.args[0].value, cst.SimpleString):
            return e.args[0].value.evaluated_value.strip().lower() in ("inf", "infinity")
    return False


def finite_minimum(node):
    """-inf -> -1e9: a fully masked row becomes uniform instead of 0/0 = NaN."""
    if _is_neg_inf(node):
        return [("finite-minimum", f"{FINITE_MIN} instead of -inf", cst.parse_expression(FINITE_MIN))]
    return []


def _is_scores(node) -> bool:
    """A product of queries and keys: a @ b, matmul/bmm/einsum."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.MatrixMultiply):
        return True
    return isinstance(node, cst.Call) and _name(node.func) in ("matmul", "bmm", "einsum")


def _first_operand(node):
    if isinstance(node, cst.BinaryOperation):
        return node.left
    tensors = [a.value for a in node.args if a.keyword is None and not isinstance(a.value, cst.SimpleString)]
    return tensors[0] if tensors else None


def scale(node):
    """The scores' missing 1/sqrt(d_k) (read from the queries' last axis), or * sqrt(d) that should be /."""
    out = []
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply) and \
            isinstance(node.right, cst.Call) and _name(node.right.func) == "sqrt" and _is_scores(node.left):
        out.append(("scale", "divided by the square root instead of multiplied",
                    node.with_changes(operator=cst.Divide(whitespace_before=node.operator.whitespace_before,
                                                          whitespace_after=node.operator.whitespace_after))))
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply) and \
            isinstance(node.right, cst.Call) and _name(node.right.func) == "sqrt" and not _is_scores(node.left):
        out.append(("unscale", f"without the * {cst.Module([]).code_for_node(node.right)}", node.left))
    if _is_scores(node):
        q = _first_operand(node)
        if isinstance(q, (cst.Name, cst.Attribute)):
            d = cst.parse_expression(f"{cst.Module([]).code_for_node(q)}.size(-1) ** 0.5")
            left = node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]) \
                if isinstance(node, cst.BinaryOperation) and not node.lpar else node
            out.append(("scale", "the scores divided by sqrt(d_k)",
                        cst.BinaryOperation(left=left, operator=cst.Divide(
                            whitespace_before=cst.SimpleWhitespace(" "), whitespace_after=cst.SimpleWhitespace(" ")),
                            right=d)))
    return out


def _shape_call(node) -> bool:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and \
        _name(node.func) in ("view", "reshape")


def _transpose(value, a: int, b: int) -> cst.Call:
    return cst.Call(func=cst.Attribute(value=value, attr=cst.Name("transpose")),
                    args=[cst.Arg(_lit(a), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                          cst.Arg(_lit(b))])


def heads(node):
    """A heads merge without moving the heads axis back (insert .transpose before .view/.reshape), or a
    split that views straight into (B, h, T, d_k) (view as (B, T, h, d_k), then transpose)."""
    if not _shape_call(node):
        return []
    out, n = [], len([a for a in node.args if a.keyword is None])
    base = node.func.value
    for a, b in ((1, 2), (0, 1)):
        inner = _transpose(base, a, b)
        if _name(node.func) == "view":
            inner = cst.Call(func=cst.Attribute(value=inner, attr=cst.Name("contiguous")), args=[])
        out.append(("transpose", f".transpose({a}, {b}) before .{_name(node.func)}",
                    node.with_changes(func=node.func.with_changes(value=inner))))
    if _name(node.func) == "view":
        out.append(("contiguous", ".reshape instead of .view (the tensor is not contiguous)",
                    node.with_changes(func=node.func.with_changes(attr=cst.Name("reshape")))))
    if n in (3, 4) and not any(a.star for a in node.args):
        args = list(node.args)
        i, j = n - 3, n - 2              # (.., h, T, d) -> (.., T, h, d), then heads back in front of T
        args[i], args[j] = args[i].with_changes(value=args[j].value), args[j].with_changes(value=args[i].value)
        out.append(("transpose", f"viewed with the heads after the positions, then .transpose({i}, {j})",
                    _transpose(node.with_changes(args=args), i, j)))
    return out


def _add_positional(call: cst.Call, value) -> cst.Call:
    args = list(call.args)
    args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return call.with_changes(args=args + [cst.Arg(value)])


def bounds(node):
    """randint/arange/range(lo, hi): an exclusive upper bound one short."""
    if not isinstance(node, cst.Call) or _name(node.func) not in ("randint", "arange", "range"):
        return []
    pos = [(i, a) for i, a in enumerate(node.args) if a.keyword is None and not a.star]
    if len(pos) == 2 and _name(node.func) == "arange" and isinstance(pos[1][1].value, cst.BinaryOperation) and \
            isinstance(pos[1][1].value.operator, cst.FloorDivide) and _int(pos[1][1].value.right) == 2:
        half = pos[1][1].value     # arange(0, d // 2) -> arange(0, d, 2): the even indices, not the first half
        new = _set_arg(node, pos[1][0], half.left)
        return [("bound", "every second index up to the end instead of the first half",
                 _add_positional(new, _lit(2)))]
    if len(pos) < 2 or _int(pos[1][1].value) is None:
        return []
    i, a = pos[1]
    v = _int(a.value)
    return [("bound", f"upper bound {v + 1} instead of {v} (exclusive)", _set_arg(node, i, _lit(v + 1)))]


def offsets(node):
    """Off by one: a slice's bound, an index 0 <-> -1, [:-1] <-> [1:] (the shifted target)."""
    out = []
    if not isinstance(node, cst.Subscript):
        return out
    for k, el in enumerate(node.slice):
        s = el.slice
        if isinstance(s, cst.Slice):
            lo, up = _int(s.lower) if s.lower else None, _int(s.upper) if s.upper else None
            if s.lower is None and up == -1 and s.step is None:
                new = s.with_changes(lower=_lit(1), upper=None)
                out.append(("shift", "[1:] instead of [:-1]", _replace_slice(node, k, new)))
            if lo == 1 and s.upper is None and s.step is None:
                new = s.with_changes(lower=None, upper=_lit(-1))
                out.append(("shift", "[:-1] instead of [1:]", _replace_slice(node, k, new)))
        elif isinstance(s, cst.Index):
            v = _int(s.value)
            if v in (0, -1) and len(node.slice) > 1:
                new = s.with_changes(value=_lit(-1 if v == 0 else 0))
                out.append(("index", f"index {-1 if v == 0 else 0} instead of {v}", _replace_slice(node, k, new)))
    return out


def _replace_slice(node: cst.Subscript, k: int, new) -> cst.Subscript:
    els = list(node.slice)
    els[k] = els[k].with_changes(slice=new)
    return node.with_changes(slice=els)


def flags(node):
    """training=True in a functional dropout -> training=self.training; .detach() dropped."""
    out = []
    if isinstance(node, cst.Call) and _name(node.func) in ("dropout", "scaled_dot_product_attention"):
        i, a = _arg(node, "training", None)
        if a is not None and isinstance(a.value, cst.Name) and a.value.value == "True":
            out.append(("flag", "training=self.training instead of True",
                        _set_arg(node, i, cst.parse_expression("self.training"))))
        i, a = _arg(node, "dropout_p", None)
        if a is not None and _name(node.func) == "scaled_dot_product_attention" and _int(a.value) != 0:
            v = cst.parse_expression(f"({cst.Module([]).code_for_node(a.value)} if self.training else 0.0)")
            out.append(("flag", "dropout only in training", _set_arg(node, i, v)))
    if isinstance(node, cst.Call) and _name(node.func) == "detach" and not node.args and \
            isinstance(node.func, cst.Attribute):
        out.append(("detach", "without .detach()", node.func.value))
    return out


def swapped_args(node):
    """f(memory, x, x, ...) -> f(x, memory, memory, ...): queries and keys/values given the other way round."""
    if not isinstance(node, cst.Call) or len(node.args) < 3 or any(a.keyword or a.star for a in node.args[:3]):
        return []
    code = cst.Module([]).code_for_node
    a0, a1, a2 = (code(a.value) for a in node.args[:3])
    if a1 != a2 or a0 == a1:
        return []
    args = list(node.args)
    args[0] = args[0].with_changes(value=node.args[1].value)
    args[1] = args[1].with_changes(value=node.args[0].value)
    args[2] = args[2].with_changes(value=node.args[0].value)
    return [("swap", f"queries from {a1}, keys and values from {a0}", node.with_changes(args=args))]


def loss_ignores_pad(node, names: set):
    """cross_entropy without ignore_index -> ignore_index=PAD (when the file defines PAD)."""
    if not isinstance(node, cst.Call) or _name(node.func) not in ("cross_entropy", "CrossEntropyLoss", "nll_loss",
                                                                   "NLLLoss"):
        return []
    if _arg(node, "ignore_index", None)[1] is not None:
        return []
    pad = next((n for n in ("PAD", "PAD_ID", "PAD_IDX", "pad_id", "pad_idx", "PAD_TOKEN") if n in names), None)
    return [("ignore-pad", f"ignore_index={pad}", _add_kw(node, "ignore_index", pad))] if pad else []


def warmup_ratio(node):
    """min((s + 1) * warmup, 1.0) -> (s + 1) / warmup: a warmup that multiplies by its length reaches 1 at once."""
    if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply) and
            isinstance(node.right, cst.Name) and "warm" in node.right.value.lower()):
        return []
    op = cst.Divide(whitespace_before=node.operator.whitespace_before, whitespace_after=node.operator.whitespace_after)
    return [("warmup", f"divided by {node.right.value} instead of multiplied", node.with_changes(operator=op))]


def all_rows(node):
    """`tok[0, 0] == EOS` (the first row decides for the batch) -> `(tok == EOS).all()`."""
    if not (isinstance(node, cst.Comparison) and len(node.comparisons) == 1 and
            isinstance(node.comparisons[0].operator, cst.Equal) and isinstance(node.left, cst.Subscript)):
        return []
    idx = [_int(e.slice.value) for e in node.left.slice if isinstance(e.slice, cst.Index)]
    if not idx or any(i != 0 for i in idx) or len(idx) != len(node.left.slice):
        return []
    code = cst.Module([]).code_for_node
    new = cst.parse_expression(f"({code(node.left.value)} == {code(node.comparisons[0].comparator)}).all()")
    return [("all-rows", "every row, not the first one alone", new)]


LESSON_LR = "1e-3"


def learning_rate(node):
    """lr=1e-6 (a parameter's default or a keyword) -> the lesson's 1e-3: a rate too small to learn in time."""
    if isinstance(node, cst.Param) and node.name.value in ("lr", "learning_rate") and node.default is not None:
        value, make = node.default, lambda v: node.with_changes(default=v)
    elif isinstance(node, cst.Arg) and node.keyword is not None and node.keyword.value in ("lr", "learning_rate"):
        value, make = node.value, lambda v: node.with_changes(value=v)
    else:
        return []
    if not isinstance(value, (cst.Float, cst.Integer)) or not 0 < float(value.value) < 1e-5:
        return []
    return [("learning-rate", f"lr={LESSON_LR} instead of {value.value}", make(cst.Float(LESSON_LR)))]


def sibling_name(node, pairs: dict):
    """model(src, tgt_out) -> model(src, tgt_in): a call given the other name of a pair assigned together."""
    if not isinstance(node, cst.Call):
        return []
    out = []
    for i, a in enumerate(node.args):
        if isinstance(a.value, cst.Name) and len(pairs.get(a.value.value, ())) == 1 and \
                not next(iter(pairs[a.value.value])).startswith("_"):
            other = next(iter(pairs[a.value.value]))
            out.append(("shift", f"{other} instead of {a.value.value}", _set_arg(node, i, cst.Name(other))))
    return out


EDITORS = (softmax_axis, unwrap_softmax, reduction_axis, triangle, polarity, finite_minimum, scale, heads, offsets, flags,
           swapped_args, bounds, learning_rate, all_rows, warmup_ratio)
