"""The CS231n pack's declaration: written only through the pack API, its bindings resolve in the team's
reference with the course's signatures, its editions are told apart, its mutants apply and name known causes."""
from __future__ import annotations

import inspect
from pathlib import Path

from harness.causes import BY_ID
from harness.packs import api
from harness.packs.checks import ROLE_CHECKS, ids
from harness.packs.cs231n import reference
from harness.packs.cs231n.mutants import EXPECTED, MUTANTS
from harness.packs.cs231n.pack import COMPONENTS, LAYERS, PACK


def _resolve(target: str):
    obj = reference
    for part in target.split(":")[1].split("."):
        obj = getattr(obj, part)
    return obj


def test_the_pack_is_api_data():
    assert isinstance(PACK, api.Pack) and PACK.name == "cs231n"
    assert [e.name for e in PACK.editions] == ["2025", "2026", "2022", "2021"]
    assert all(b.role in api.ROLES and b.component.split(".")[0] in COMPONENTS for b in PACK.bindings)
    assert all(b.role in ROLE_CHECKS for b in PACK.bindings if b.role in ("attention", "positional", "model",
                                                                           "sampler"))
    assert PACK.binding("MultiHeadAttention").mask == api.Mask(blocks="zero", dtype="any", shape="TxS")


def test_every_binding_resolves_in_the_reference_with_its_arguments():
    for b in PACK.bindings:
        obj = _resolve(b.target)
        cls = obj if inspect.isclass(obj) else getattr(reference, b.target.split(":")[1].split(".")[0])
        params = inspect.signature(cls).parameters
        assert set(b.init) <= set(params), (b.component, set(b.init) - set(params))
    assert list(inspect.signature(reference.MultiHeadAttention.forward).parameters) == \
        ["self", "query", "key", "value", "attn_mask"]
    assert list(inspect.signature(reference.CaptioningTransformer.sample).parameters) == \
        ["self", "features", "max_length"]


def test_editions_are_told_apart_by_their_markers():
    def edition(text: str) -> str:
        return next(e.name for e in PACK.editions if all(m in text for p, m in e.markers.items() if p == LAYERS))
    assert edition("class PatchEmbedding(nn.Module): ...") == "2025"
    assert edition("- attn_mask: Array of shape (S, T) where mask[i,j] == 0") == "2022"
    assert edition("- attn_mask: Array of shape (T, S) where mask[i,j] == 0") == "2021"
    student = {e.name: set(e.student) for e in PACK.editions}
    assert "CaptioningTransformer" not in student["2021"] and "TransformerEncoderLayer" in student["2025"]


def test_the_mutants_apply_and_name_declared_causes_and_checks():
    declared = set(ids(PACK))
    assert {m.id for m in MUTANTS} == set(EXPECTED)
    for m in MUTANTS:
        assert m.source() != Path(reference.__file__).read_text()
        assert m.cause in BY_ID, m.id
        component, probe, _ = EXPECTED[m.id]
        assert f"{component}.{probe}" in declared, m.id
