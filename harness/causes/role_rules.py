"""What the causes of the generic role probes share (parent side, torch-free): finding a role's failed check in
any pack's result (ids f"{component}.{probe}", data.role), its mechanism's kind, and a rule made of those.

A rule names its cause at 0.9 only when the probe observed the mechanism (data.mechanism.kind among the cause's
kinds); a component whose two eval passes differ makes its other comparisons no evidence."""
from __future__ import annotations

from ..packs.cs231n.pack import PACK as CS231N
from .base import Finding, Observed, say

BUILTIN = (CS231N,)
ASSIGNMENTS = tuple(p.name for p in BUILTIN)
COMPARING = ("mask-float", "mask-bool", "causal", "batch", "permutation", "inputs", "scale", "reference")


def role_ids(role: str, probe: str) -> tuple[str, ...]:
    """The check ids the built-in packs' bindings of `role` give `probe`."""
    return tuple(dict.fromkeys(f"{b.component}.{probe}" for p in BUILTIN for b in p.bindings if b.role == role))


def observed(role: str, probes: tuple[str, ...], kinds: tuple[str, ...]) -> tuple[Observed, ...]:
    return tuple(Observed(cid, values=kinds) for probe in probes for cid in role_ids(role, probe))


def kind(c: dict | None) -> str | None:
    m = ((c or {}).get("data") or {}).get("mechanism")
    return m.get("kind") if isinstance(m, dict) else None


def failed(ev, role: str, probe: str) -> list[dict]:
    """The failed checks (with a measurement) of `probe` on any component bound to `role`."""
    out = []
    for cid, c in ev.by_id.items():
        d = c.get("data") or {}
        if d.get("role") == role and cid.endswith("." + probe) and ev.failed(cid):
            out.append(c)
    return out


def random_component(ev, component: str) -> bool:
    c = ev.by_id.get(f"{component}.eval-determinism")
    return bool(c and c.get("status") == "fail")


def rule(role: str, probes: tuple[str, ...], kinds: tuple[str, ...], explains: tuple[str, ...] = (),
         also=None, confidence: float = 0.9):
    """diagnose(ev): the first failed check of `probes` whose mechanism is one of `kinds`; it explains the same
    component's `explains` checks (and what `also(ev, component)` adds)."""
    def diagnose(ev):
        for probe in probes:
            for c in failed(ev, role, probe):
                comp = (c.get("data") or {}).get("component") or c["id"].split(".")[0]
                if kind(c) not in kinds or (probe in COMPARING and random_component(ev, comp)):
                    continue
                mech = (c.get("data") or {}).get("mechanism") or {}
                lines = [say(c)] + (["mechanism: " + mech["text"]] if mech.get("text") else [])
                ex = tuple(f"{comp}.{p}" for p in (probes + explains)) + (tuple(also(ev, comp)) if also else ())
                return Finding(confidence, lines, c.get("location"), explains=ex, component=comp)
        return None
    return diagnose


def model_leaks(ev, component: str) -> list[str]:
    """A model's causal check that failed although the mask it passes is right (or with NaN): the attention's
    masking explains it."""
    return [c["id"] for c in failed(ev, "model", "causal") if kind(c) in ("attention-ignores-mask", "inverted",
                                                                                "batched-mask")] + \
        [c["id"] for c in failed(ev, "model", "causal") if c.get("measured") == "nan"] + \
        [c["id"] for c in failed(ev, "model", "reference")]


def layer_failures(ev, component: str) -> list[str]:
    """The layers' failed checks an attention's own bug explains (they call the attention): their dropout, mask and
    reference comparisons, and a classifier's over those layers (its eval passes and its reference)."""
    return [c["id"] for probe in ("dropout", "mask", "reference") for c in failed(ev, "layer", probe)] + \
        [c["id"] for probe in ("eval-determinism", "reference") for c in failed(ev, "classifier", probe)]


def attention_unwritten(ev) -> bool:
    """A component bound to the attention role is still the starter (its checks skipped as not implemented, by
    the pack's loader or by the role probe)."""
    return unwritten(ev, "attention")


def inside(roles: tuple[str, ...], probes: tuple[str, ...]):
    """also(ev, component): the failed `probes` checks of the components bound to `roles`, which are built on the
    component a cause names (a layer on its feed-forward, a model on its layers, a classifier on its patch
    embedding): a piece's own bug explains what it makes them compute."""
    def also(ev, component: str) -> list[str]:
        return [c["id"] for role in roles for probe in probes for c in failed(ev, role, probe)]
    return also


def unwritten(ev, role: str) -> bool:
    """A component bound to `role` is still the starter (its checks skipped as not implemented, by the pack's
    loader or by the role probe)."""
    bound = {b.component for p in BUILTIN for b in p.bindings if b.role == role}
    for c in ev.by_id.values():
        d = c.get("data") or {}
        if (d.get("role") == role or d.get("component") in bound) and \
                (d.get("not_implemented") or d.get("kind") == "not-implemented"):
            return True
    return False
