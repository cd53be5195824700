"""The generic role probes, in process, on the CS231n pack's reference (clean: every check passes, no problem
diagnosis) and on each of its mutants (the expected probe fails with the mechanism's kind; the engine names the
mutant's cause first, at the edited line)."""
from __future__ import annotations

import importlib.util
import itertools
import sys

import pytest

from harness import engine
from harness.causes import BY_ID
from harness.child.probes.roles import ROLE_PROBES, RoleContext
from harness.packs.checks import ROLE_CHECKS
from harness.packs.cs231n import reference as ref_module
from harness.packs.cs231n.mutants import ALSO, ERRORS, EXPECTED, MUTANTS
from harness.packs.cs231n.pack import PACK

KEY = "cs231n/transformer_layers.py"
_names = itertools.count()


def _load(tmp_path, text: str):
    path = tmp_path / "cs231n" / "transformer_layers.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"role_probe_student_{next(_names)}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # as a loader leaves it: inspect finds the class's file through it
    spec.loader.exec_module(module)
    return module


def _resolve(module, target: str):
    obj = module
    for part in target.split(":")[1].split("."):
        obj = getattr(obj, part)
    return obj


def _checks(module, text: str, components=None) -> list[dict]:
    out = []
    for b in PACK.bindings:
        if b.role not in ROLE_PROBES or (components and b.component not in components):
            continue
        rctx = RoleContext(b, _resolve(module, b.target), _resolve(ref_module, b.target), 0, "cpu", False,
                           {KEY: text})
        for probe in ROLE_PROBES[b.role]:
            got = probe.fn(rctx)
            assert [c["id"] for c in got] == [f"{b.component}.{probe.id}"]
            out += got
    return out


def test_the_declared_role_checks_are_the_probes():
    for role, probes in ROLE_PROBES.items():
        assert [p.id for p in probes] == [pid for pid, _, _ in ROLE_CHECKS[role]], role
        assert all(p.cost in ("static", "quick", "train") for p in probes)


def test_the_reference_is_clean(tmp_path):
    text = open(ref_module.__file__).read()
    checks = _checks(_load(tmp_path, text), text)
    assert {c["status"] for c in checks} == {"pass"}, [(c["id"], c["status"], c["detail"]) for c in checks
                                                       if c["status"] != "pass"]
    assert engine.diagnose({"assignment": PACK.name, "checks": checks, "submission": KEY}) == []


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.id for m in MUTANTS])
def test_each_mutant_fails_its_probe_and_is_named_at_its_line(tmp_path, mutant):
    text = mutant.source()
    component, probe, mech = EXPECTED[mutant.id]
    checks = _checks(_load(tmp_path, text), text, {component, *ALSO.get(mutant.id, ())})
    got = {c["id"]: c for c in checks}[f"{component}.{probe}"]
    assert got["status"] == ("error" if mutant.id in ERRORS else "fail"), got
    assert got["data"]["mechanism"]["kind"] == mech, got
    diagnoses = engine.diagnose({"assignment": PACK.name, "checks": checks, "submission": KEY})
    first = diagnoses[0]
    assert first["id"] == mutant.cause and first["confidence"] >= 0.8, diagnoses
    assert mutant.cause in BY_ID
    edited = [i for i, line in enumerate(text.splitlines(), 1)
              if any(e.new.strip() and e.new.strip().splitlines()[0] in line for e in mutant.edits)]
    assert first["location"]["file"] == KEY
    assert any(abs(first["location"]["line"] - n) <= 1 for n in edited), (first["location"], edited)


# correct counterparts of the new properties: edits of the reference that keep its function stay clean
COUNTERPARTS = {
    # a (1, T, T) causal mask into an attention that lets masked_fill broadcast it
    "batched-mask-broadcast": [("tgt_mask = torch.tril(torch.ones(t, t, device=captions.device, dtype=torch.bool))",
                                "tgt_mask = torch.tril(torch.ones(t, t, device=captions.device, dtype=torch.bool))"
                                "[None]")],
    # the positional module's output used as returned, in two statements
    "pe-two-statements": [("words = self.positional_encoding(self.embedding(captions))",
                           "words = self.embedding(captions)\n        words = self.positional_encoding(words)")],
    # the encoder layer's mask passed by position, its default None written with a type hint
    "layer-mask-hinted": [("def forward(self, src, src_mask=None):\n        a = ",
                           "def forward(self, src, src_mask: torch.Tensor | None = None):\n        a = ")],
}


@pytest.mark.parametrize("name", sorted(COUNTERPARTS))
def test_correct_counterparts_stay_clean(tmp_path, name):
    from mutants.model import Edit, apply_edits
    text = apply_edits(open(ref_module.__file__).read(), tuple(Edit(o, n) for o, n in COUNTERPARTS[name]))
    checks = _checks(_load(tmp_path, text), text, {"CaptioningTransformer", "MultiHeadAttention",
                                                   "TransformerEncoderLayer"})
    assert {c["status"] for c in checks} == {"pass"}, [(c["id"], c["detail"]) for c in checks if c["status"] != "pass"]
    assert engine.diagnose({"assignment": PACK.name, "checks": checks, "submission": KEY}) == []


@pytest.mark.parametrize("shape,status", [("TxS", "skip"), ("NxTxS", "fail")])
def test_a_batched_mask_is_a_note_unless_the_pack_declares_one(tmp_path, shape, status):
    """The attention that adds two axes whatever the mask's rank: a robustness note where the course's mask is
    (S, T), a problem where the pack's Mask declares leading axes; at the statement that reshapes the mask."""
    import dataclasses
    mutant = next(m for m in MUTANTS if m.id == "cs231n-mask-batched")
    text = mutant.source()
    module = _load(tmp_path, text)
    b = next(b for b in PACK.bindings if b.role == "attention")
    b = dataclasses.replace(b, mask=dataclasses.replace(b.mask, shape=shape))
    probe = next(p for p in ROLE_PROBES["attention"] if p.id == "mask-batched")
    got = probe.fn(RoleContext(b, _resolve(module, b.target), _resolve(ref_module, b.target), 0, "cpu", False,
                               {KEY: text}))[0]
    assert got["status"] == status and got["data"]["mechanism"]["kind"] == "batch-axes", got
    line = text.splitlines()[got["location"]["line"] - 1]
    assert "attn_mask[None, None]" in line
    diagnoses = engine.diagnose({"assignment": PACK.name, "checks": [got], "submission": KEY})
    assert [d["id"] for d in diagnoses if d["confidence"] >= 0.5] == (["mask-batch-axes"] if status == "fail" else [])


# the patch embedding written the other ways students write it correctly: a strided convolution (other parameters:
# the classifier's comparisons with the reference skip), and unfold over both spatial axes
PATCHES = {
    "conv": [("self.proj = nn.Linear(self.patch_dim, embed_dim)",
              "self.proj = nn.Conv2d(in_channels, embed_dim, patch_size, stride=patch_size)"),
             ("return self.proj(grid.reshape(n, -1, self.patch_dim))",
              "return self.proj(x).flatten(2).transpose(1, 2)")],
    "unfold": [("grid = x.reshape(n, c, hh // p, p, ww // p, p).permute(0, 2, 4, 1, 3, 5)",
                "grid = x.unfold(2, p, p).unfold(3, p, p).permute(0, 2, 3, 1, 4, 5)")],
}


@pytest.mark.parametrize("name", sorted(PATCHES))
def test_patch_embeddings_written_otherwise_stay_clean(tmp_path, name):
    from mutants.model import Edit, apply_edits
    text = apply_edits(open(ref_module.__file__).read(), tuple(Edit(o, n) for o, n in PATCHES[name]))
    checks = _checks(_load(tmp_path, text), text, {"PatchEmbedding", "VisionTransformer"})
    assert {c["id"] for c in checks if c["status"] == "pass"} >= {"PatchEmbedding.layout", "PatchEmbedding.shape",
                                                                   "VisionTransformer.attends-all"}
    assert not [c for c in checks if c["status"] in ("fail", "error")], [(c["id"], c["detail"]) for c in checks]
    assert engine.diagnose({"assignment": PACK.name, "checks": checks, "submission": KEY}) == []


def test_a_wrong_patch_layout_names_the_token_that_moved_and_the_one_expected(tmp_path):
    mutant = next(m for m in MUTANTS if m.id == "cs231n-patch-columns-first")
    text = mutant.source()
    got = {c["id"]: c for c in _checks(_load(tmp_path, text), text, {"PatchEmbedding"})}["PatchEmbedding.layout"]
    mech = got["data"]["mechanism"]
    # pixel of patch 1 (grid row 0, column 1) with the grid's axes swapped lands in token 1 * 4 + 0 = 4
    assert (mech["patch"], mech["moved"], mech["expected"]) == (1, [4], 1), mech
    assert "moved token 4 where token 1 alone should move" in got["detail"]
    assert "permute(0, 4, 2" in text.splitlines()[got["location"]["line"] - 1]
