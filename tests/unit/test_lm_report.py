"""The `lm` report's pictures: the probes' measurements (run here on the reference's adapters and on
hand-broken ones, no child process), their drawing, the notes when a picture cannot be drawn, and (slow,
browser) real checks of the reference repository and a RoPE mutant opened in headless Chromium.
"""
from __future__ import annotations

import copy
import os
import types

import pytest
import torch

from harness.child.probes.lm import pictures as lm_pictures
from harness.child.probes.base import Context
from harness.child.probes.lm.common import reference
from harness.report import html, lm_figures, lm_sections
from test_report import _assert_loads, _open, _sections, browser  # noqa: F401 (browser: a fixture)

os.environ.setdefault("OMP_NUM_THREADS", "1")
REF = reference()


def ctx_for(**adapters) -> Context:
    """A probe context whose 'student' module is the given adapter functions."""
    return Context(module=types.SimpleNamespace(**adapters), source=types.SimpleNamespace(code_path="<none>"),
                   assignment="lm")


def rope_ignoring_positions(d_k, theta, max_seq_len, x, token_positions):
    """A known bug: the index in the tensor is used as the position."""
    return REF.run_rope(d_k, theta, max_seq_len, x, torch.arange(x.shape[-2]))


def rope_not_implemented(*args):
    raise NotImplementedError


def measured_rope(fn) -> dict:
    ctx = ctx_for(run_rope=fn)
    lm_pictures.rope_scores(ctx)
    return ctx.artifacts["lm_rope_scores"]


def lm_result(artifacts: dict, checks: list | None = None) -> dict:
    return {"schema": 1, "submission": "student_repo", "assignment": "lm", "quick": True, "verdict": "clean",
            "diagnoses": [], "checks": checks or [], "skipped_code": [], "stdout": "", "stderr": "",
            "artifacts": artifacts, "timings": {"total_s": 1.0}, "error": None}


# -- RoPE --------------------------------------------------------------------------------------------

def test_reference_rope_scores_depend_only_on_the_offset():
    art = measured_rope(REF.run_rope)
    assert len(art["offset"]) == len(art["score"]) == 32 * 32
    assert art["spread"] < 1e-5 and art["max_dev"] < 1e-5           # float32 round-off only
    st = lm_figures.rope_stats(art)
    assert st["nonfinite"] == 0 and len(st["ref"]) == 63             # offsets -31..31
    fig = lm_figures.rope_relative(art)
    assert "lie on the reference's curve" in fig.caption


def test_rope_that_ignores_token_positions_shows_spread_at_equal_offsets():
    art = measured_rope(rope_ignoring_positions)
    assert art["spread"] > 0.1 and art["max_dev"] > 0.1
    assert lm_figures.rope_stats(art)["spread"] == art["spread"]
    cap = lm_figures.rope_relative(art).caption
    assert "depends on the positions themselves" in cap and f"{art['spread']:.2g}" in cap


def test_rope_stats_without_the_probe_numbers_are_computed_from_the_points():
    art = measured_rope(rope_ignoring_positions)
    bare = {k: v for k, v in art.items() if k not in ("spread", "max_dev")}
    st = lm_figures.rope_stats(bare)
    assert abs(st["spread"] - art["spread"]) < 1e-3 and abs(st["max_dev"] - art["max_dev"]) < 1e-3


def test_rope_not_implemented_leaves_a_note_and_the_report_says_so():
    art = measured_rope(rope_not_implemented)
    assert set(art) == {"skipped"} and "NotImplementedError" in art["skipped"]
    secs = _sections(html.render(lm_result({"lm_rope_scores": art})))
    assert "<img" not in secs["lm-rope"] and 'class="absent"' in secs["lm-rope"]
    assert "NotImplementedError" in secs["lm-rope"]


def test_an_adapter_that_timed_out_on_the_properties_is_not_called_again():
    calls = []
    ctx = ctx_for(run_rope=lambda *a: calls.append(1) or REF.run_rope(*a))
    lm_pictures.rope_scores(ctx, [{"id": "lm-rope-norm", "data": {"component": "rope", "timeout": True}}])
    assert calls == [] and "did not return in time" in ctx.artifacts["lm_rope_scores"]["skipped"]
    lm_pictures.rope_scores(ctx, [{"id": "lm-rope-norm", "data": {"component": "rope", "timeout": False}}])
    assert calls == [1] and ctx.artifacts["lm_rope_scores"]["spread"] < 1e-5


def test_missing_artifact_is_explained_by_the_component_state():
    checks = [{"id": "lm-rope", "status": "skip", "measured": {"status": "not implemented"}, "expected": "",
               "detail": "run_rope raises NotImplementedError (not implemented yet)",
               "data": {"component": "rope", "kind": "not-implemented"}, "location": None}]
    secs = _sections(html.render(lm_result({}, checks)))
    assert "run_rope is not implemented yet" in secs["lm-rope"]
    assert "did not run" in secs["lm-causal"]                        # no lm check at all


# -- causal dependency -------------------------------------------------------------------------------

def _lm_args(ids):
    g = torch.Generator().manual_seed(5)
    from harness.child.probes.lm.components import lm_weights
    return (40, 16, 32, 2, 4, 48, 10000.0, lm_weights(g, 40, 32, 2, 48), ids)


def measured_dependency(fn) -> dict:
    ctx = ctx_for(run_transformer_lm=fn)
    lm_pictures.lm_dependency(ctx, _lm_args, torch.tensor([3, 9, 1, 30, 22, 7, 15, 4]), 40, 1e-4)
    return ctx.artifacts["lm_dependency"]


def test_reference_lm_dependency_is_lower_triangular():
    m = torch.tensor(measured_dependency(REF.run_transformer_lm)["matrix"])
    assert m.shape == (8, 8)
    assert float(m.triu(1).abs().max()) == 0.0                       # no output sees a later token
    lower = torch.ones(8, 8, dtype=torch.bool).tril()
    assert float(m[lower].min()) > 1e-4                              # and every output sees every earlier one
    cap = lm_figures.lm_causal({"matrix": m.tolist(), "tol": 1e-4}).caption
    assert cap.startswith("No output depends on a later input")


def test_lm_that_sees_the_next_token_leaks_on_the_superdiagonal():
    def peeks(*args):
        ids = args[-1]
        ahead = torch.cat([ids[:, 1:], ids[:, -1:]], dim=1)          # position i also gets token i + 1
        return REF.run_transformer_lm(*args) + 0.1 * REF.run_transformer_lm(*args[:-1], ahead)
    art = measured_dependency(peeks)
    m = torch.tensor(art["matrix"])
    leaks = (m.triu(1) > 1e-4).nonzero().tolist()
    assert leaks == [[i, i + 1] for i in range(7)]
    assert lm_figures.lm_causal(art).caption.startswith("7 (output, later input) pair(s)")


# -- schedule and robustness -------------------------------------------------------------------------

def test_schedule_picture_reports_the_largest_difference():
    its = list(range(27))
    ref = [REF.run_get_lr_cosine_schedule(i, 1.0, 0.1, 7, 21) for i in its]
    art = {"it": its, "lr": ref, "ref": ref, "max_lr": 1.0, "min_lr": 0.1, "warmup": 7, "cycle": 21}
    assert lm_figures.lr_schedule(art).caption.startswith("Yours follows the reference")
    art["lr"] = ref[:-1] + [0.4]
    assert "Largest difference from the reference: 0.3" in lm_figures.lr_schedule(art).caption


@pytest.mark.parametrize("bad", [None, "x", 3, [], {}, {"offset": [1, 2], "score": [None]},
                                 {"offset": [0, 1], "score": [None, None]}, {"matrix": "rows"},
                                 {"matrix": [[None]]}, {"it": [1, 2], "lr": [0.1]}, {"skipped": 7}])
def test_malformed_lm_artifacts_never_crash(bad):
    r = lm_result({k: copy.deepcopy(bad) for k in ("lm_rope_scores", "lm_dependency", "lm_lr_schedule")})
    text = html.render(r)
    assert "could not be rendered" not in text
    secs = _sections(text)
    for sid in ("lm-rope", "lm-causal", "lm-schedule"):
        assert "<img" in secs[sid] or 'class="absent"' in secs[sid], sid


def test_other_assignments_get_no_lm_sections():
    r = lm_result({"lm_rope_scores": measured_rope(REF.run_rope)})
    r["assignment"] = "reversal"
    assert "lm-rope" not in _sections(html.render(r))
    assert lm_sections.sections(r, {}, str) == []


# -- real checks, in a browser ----------------------------------------------------------------------

def _checked_repo(tmp_path_factory, name, files) -> dict:
    from harness.api import check_file
    from harness.runner import Limits
    root = tmp_path_factory.mktemp(name)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    result = check_file(root, quick=True, limits=Limits(timeout_s=600.0))
    assert result.get("error") is None and result["assignment"] == "lm", result.get("error")
    return result


@pytest.fixture(scope="module")
def lm_checked(tmp_path_factory):
    """--quick checks of the reference repository and the RoPE-ignores-token-positions mutant (~15 s each)."""
    import mutants
    from mutants.lm_export import mutant_repo_files, reference_repo_files
    mutant = next(m for m in mutants.LM_MUTANTS if m.id == "lm-rope-ignores-token-positions")
    return {"reference": _checked_repo(tmp_path_factory, "lm_reference", reference_repo_files()),
            "rope-mutant": _checked_repo(tmp_path_factory, "lm_rope_mutant", mutant_repo_files(mutant))}


