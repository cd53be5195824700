"""The model hands its attention a mask with leading axes the attention mis-broadcasts (a role probe's cause: a
pack binding the model and the attention roles)."""
from .base import Cause, Finding, say
from .role_rules import ASSIGNMENTS, failed, kind, observed

CAUSE = Cause(
    id='mask-batch-axes',
    title="A mask with leading axes is mis-broadcast by the attention",
    what="The model builds its causal mask with a leading axis ((1, T, T)) where the course's mask is (T, T), and the attention adds its own axes whatever the mask's rank (mask[None, None]), so the scores broadcast to five axes and the batch and head axes mix.",
    why='Each example then reads other examples\' positions and the later tokens: training and sampling run but the model is not causal per example.',
    symptom="Changing a later caption token moves earlier positions' scores although the mask is the lower triangle.",
    fix="Pass the (T, T) mask the course declares (no unsqueeze), and in the attention add axes by the mask's rank (attn_mask.view(1, 1, S, T) only for a 2-D mask, or let masked_fill broadcast it).",
    lesson='CS231n assignment 3, MultiHeadAttention.forward: attn_mask is (S, T); masked_fill broadcasts it over (N, H).',
    assignments=ASSIGNMENTS,
    mechanism="the model's causal leak with the mask it passes read by a forward pre-hook (the lower triangle with leading axes, kind batched-mask), and the attention called with a (1, S, T) / (N, S, T) copy of a mask giving another output than the (S, T) one (kind batch-axes)",
    observed=observed('model', ('causal',), ('batched-mask',)) + observed('attention', ('mask-batched',), ('batch-axes',)),
)


def _notes(ev) -> list[dict]:
    """The attention's mask-batched checks that saw the mis-broadcast (a failure, or a robustness note)."""
    return [c for cid, c in ev.by_id.items() if ((c.get("data") or {}).get("role") == "attention" and
                                                 cid.endswith(".mask-batched") and kind(c) == "batch-axes" and
                                                 c.get("status") in ("fail", "skip"))]


def _component(c: dict) -> str:
    return str((c.get("data") or {}).get("component") or c["id"].rsplit(".", 1)[0])


def diagnose(ev):
    out, notes = [], _notes(ev)
    for c in failed(ev, "model", "causal"):
        if kind(c) != "batched-mask" or not notes:     # the attention applies batched masks as 2-D ones: its
            continue                                    # other mask failure explains the leak (model_leaks)
        comp = _component(c)
        mech = ((c.get("data") or {}).get("mechanism") or {}).get("text")
        out.append(Finding(0.9, [say(c)] + ([f"mechanism: {mech}"] if mech else []) +
                           [f"the attention: {say(n)}" for n in notes], c.get("location"),
                           explains=(c["id"], f"{comp}.reference"), component=comp))
        for n in notes:
            out.append(Finding(0.9, [say(n), f"the model passes such a mask: {c['id']} fails"], n.get("location"),
                               explains=(n["id"],), component=_component(n)))
    if not out:
        for n in notes:         # a pack whose Mask declares batched masks: the attention's failure alone
            if n.get("status") == "fail":
                out.append(Finding(0.9, [say(n)], n.get("location"), explains=(n["id"],), component=_component(n)))
    return out or None
