"""The submission contract: required and optional names, one forward pass, parameter count."""
from __future__ import annotations

import torch

from ...assignments import assignment_of
from ...checks import BY_ID
from .base import check, rnd
from .common import VOCAB, batch, eval_model

# The lesson's parameter table, at the defaults.
LESSON_PARAMS = {"embeddings": 1664, "encoder": 99968, "decoder": 133504, "generator": 845, "total": 235981}


def names(ctx):
    """The contract: the assignment's required and optional names (harness/assignments.py)."""
    required, optional = assignment_of(ctx.assignment).required, assignment_of(ctx.assignment).optional
    missing = [n for n in required if not ctx.has(n)]
    absent = [n for n in optional if not ctx.has(n)]
    if missing:
        return [check("contract", "fail", {"missing": missing, "absent_optional": absent},
                      f"defines {', '.join(required)}",
                      f"required name(s) {', '.join(missing)} not defined at the top level of the file")]
    detail = "all contract names defined" if not absent else \
        f"optional names absent (their checks are skipped): {', '.join(absent)}"
    return [check("contract", "pass", {"missing": [], "absent_optional": absent},
                  f"defines {', '.join(required)}", detail)]


def shapes(ctx):
    model = eval_model(ctx)
    src, tgt = batch(ctx, 2, 5, 7)
    tgt_in = tgt[:, :-1]
    with torch.no_grad():
        logits, maps = ctx.forward(model, src, tgt_in)
    want = (2, tgt_in.size(1), VOCAB)
    got = tuple(logits.shape)
    ok = got == want
    ctx.cache["forward_ok"] = ok
    return [check("shapes", "pass" if ok else "fail", list(got), f"logits of shape {list(want)} (B, T_tgt, VOCAB)",
                  "one forward pass with batch 2" if ok else f"logits have shape {list(got)}",
                  data={"maps": None if maps is None else len(maps) if isinstance(maps, (list, tuple)) else 1})]


def _breakdown(model):
    """Parameters per lesson component, by the module attribute names of the lesson when present."""
    total = sum(p.numel() for p in model.parameters())
    parts = {"total": total}
    for label, attrs in (("embeddings", ("src_emb", "tgt_emb")), ("encoder", ("enc",)),
                         ("decoder", ("dec",)), ("generator", ("generator",))):
        mods = [getattr(model, a) for a in attrs if isinstance(getattr(model, a, None), torch.nn.Module)]
        if mods:
            parts[label] = sum(p.numel() for m in mods for p in m.parameters())
    return parts


def param_count(ctx):
    model = ctx.model()
    parts = _breakdown(model)
    trainable_pe = [n for n, p in model.named_parameters() if p.dim() >= 2 and p.shape[-2] >= 64 and "pe" in n.lower()]
    ok = parts["total"] == LESSON_PARAMS["total"]
    detail = "matches the lesson's table" if ok else \
        f"{parts['total']:,} parameters against the lesson's 235,981 (different designs may differ legitimately)"
    # A different count is not itself a bug (pre-norm adds LayerNorms); it is evidence for causes that change it.
    return [check("param-count", "pass" if ok else "info", parts, "235,981 (lesson table)", detail,
                  data={"lesson": LESSON_PARAMS, "pe_params": trainable_pe})]


def first_loss(ctx):
    from .common import ref_loss
    model = ctx.model()
    model.train()
    src, tgt = batch(ctx, 64)
    logits, _ = ctx.forward(model, src, tgt[:, :-1])
    loss = float(ref_loss(logits, tgt[:, 1:]).detach())
    std = float(logits.detach().float().std())
    # The range and its calibration are declared (checks.py; the lesson's "2.5 to 3.5" would blame correct code).
    decl = BY_ID["first-loss"]
    status = "pass" if decl.bound.ok(loss) else "fail"
    line = _output_layer_line(ctx, model) if loss > decl.bound.hi else None
    return [check("first-loss", status, rnd(loss), f"{decl.text} (ln 13 = 2.565 for uniform logits; correct code "
                                                   f"{decl.correct})",
                  f"cross-entropy of the untrained model on one batch of 64; logit std {std:.2f}",
                  data={"loss": rnd(loss), "logit_std": rnd(std)}, location=ctx.where(line))]


def _output_layer_line(ctx, model):
    """Where the oversized logits come from: an init of the output layer, or a scaling where it is applied."""
    from . import locate
    heads = [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and m.out_features == VOCAB]
    if not heads:
        return None
    name, head = heads[-1]
    attr = name.split(".")[-1]
    xavier = (2.0 / (head.in_features + head.out_features)) ** 0.5 / 3 ** 0.5 * 3 ** 0.5  # std of xavier_uniform_
    if float(head.weight.std()) > 2 * xavier:
        for fn in locate.functions(ctx, "MiniTransformer.__init__"):
            hits = [ln for ln in locate.lines_mentioning(fn, attr) if ln != ctx.built_at(head)]
            if hits:
                return hits[-1]
    for fn in locate.functions(ctx, "MiniTransformer.forward"):
        hits = locate.lines_mentioning(fn, attr)
        if hits:
            return hits[-1]
    return ctx.built_at(head)
