"""Declarations hold the values (issue 28 item 2, issue 27 item 4): a check's numeric threshold is a Bound in
harness/checks.py, the probe compares with it, and every text that states it (the check's `expected`, the
report's introductions, figures and captions) renders it. These tests fail when a copy is typed instead."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from harness import checks, lm_table
from harness.checks import BY_ID, Bound, Range, bound, value

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "harness"
BOUNDED = sorted(c.id for c in BY_ID.values() if c.bound is not None)
GOLDENS = sorted((Path(__file__).resolve().parent / "goldens").glob("*.json"))


# ---- the Bound value ---------------------------------------------------------------------------------------

def test_a_bound_compares_and_renders_as_the_texts_write_it():
    assert str(Range(2.4, 6.5)) == "2.4-6.5" and Range(2.4, 6.5).ok(2.4) and not Range(2.4, 6.5).ok(6.51)
    assert str(Bound(hi=1e-4)) == "< 1e-4" and Bound(hi=1e-4).ok(9e-5) and not Bound(hi=1e-4).ok(1e-4)
    assert str(Bound(lo=1e-3)) == "> 1e-3" and not Bound(lo=1e-3).ok(1e-3)
    assert str(Bound(lo=5e-5, closed=True)) == ">= 5e-5" and Bound(lo=5e-5, closed=True).ok(5e-5)
    assert str(Bound(hi=0.5, closed=True)) == "<= 0.5" and checks.num(400) == "400"
    assert checks.num(2.5e-6) == "2.5e-6" and checks.num(0.001) == "1e-3" and checks.num(0.05) == "0.05"


@pytest.mark.parametrize("cid", BOUNDED)
def test_a_bounded_check_states_its_threshold_from_its_bound(cid):
    c = BY_ID[cid]
    assert c.text == str(c.bound) and c.source, cid
    if c.correct is not None:       # correct code's spread passes the check it calibrated
        assert c.bound.ok(c.correct.lo) and c.bound.ok(c.correct.hi), cid


def test_first_loss_declares_the_range_the_probe_uses():
    """Issue 28: checks.py said 2.6-4.2 while the probe compared with 2.4-6.5."""
    src = (HARNESS / "child" / "probes" / "contract.py").read_text()
    assert bound("first-loss") == Range(2.4, 6.5) and 'BY_ID["first-loss"]' in src


# ---- no literal copies -------------------------------------------------------------------------------------

def _emitters() -> dict[str, list[Path]]:
    """check id -> the probe modules whose check(...) calls emit it."""
    out: dict[str, list[Path]] = {}
    for p in sorted((HARNESS / "child" / "probes").glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in \
                    ("check", "not_finite") and len(node.args) >= 2:
                arg = node.args[0] if getattr(node.func, "id", None) == "check" else node.args[1]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    out.setdefault(arg.value, []).append(p)
                elif isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
                    prefix = arg.values[0].value             # f"residual-{...}": every declared id it can be
                    for cid in BY_ID:
                        if cid.startswith(prefix):
                            out.setdefault(cid, []).append(p)
    return out


def _numbers(b: Bound) -> set[float]:
    return {v for v in (b.lo, b.hi) if v is not None}


@pytest.mark.parametrize("cid", BOUNDED)
def test_the_probe_that_emits_a_bounded_check_holds_no_copy_of_its_threshold(cid):
    """Neither a comparison with the declared number nor a string that states it: the probe reads the Bound."""
    emitters = _emitters().get(cid, [])
    assert emitters, f"{cid}: no probe emits it"
    b = BY_ID[cid].bound
    texts = {str(b)} | ({str(BY_ID[cid].correct)} if BY_ID[cid].correct else set())
    for p in set(emitters):
        tree = ast.parse(p.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                consts = [n.value for n in [node.left, *node.comparators] if isinstance(n, ast.Constant)]
                hits = [v for v in consts if isinstance(v, (int, float)) and not isinstance(v, bool)
                        and v in _numbers(b) and _near(node, cid, p)]
                assert not hits, f"{p.name}:{node.lineno} compares with {hits[0]}, the declared bound of {cid}"
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for t in texts:
                    assert t not in node.value or _ours(node.value, cid), \
                        f"{p.name}:{node.lineno} states {t!r} in a literal; render it from checks.BY_ID[{cid!r}]"


def _near(node, cid, path) -> bool:
    """A comparison inside a function that emits the check (another check may share the number)."""
    tree = ast.parse(path.read_text())
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and fn.lineno <= node.lineno <= fn.end_lineno:
            seg = ast.get_source_segment(path.read_text(), fn)
            return f'"{cid}"' in seg or f'"{cid.rsplit("-", 1)[0]}-{{' in seg
    return False


def _ours(text: str, cid: str) -> bool:
    return False


REPORT_SOURCES = sorted((HARNESS / "report").glob("*.py"))
DECLARED_TEXTS = {f"{cid} correct": str(BY_ID[cid].correct) for cid in BY_ID if BY_ID[cid].correct} | \
    {f"{cid} {name}": str(v) for cid in BY_ID for name, v in BY_ID[cid].values if isinstance(v, Bound)}


@pytest.mark.parametrize("path", REPORT_SOURCES, ids=lambda p: p.name)
def test_the_report_types_no_declared_range(path):
    """A declared range (correct code's spread, a mutant's) is rendered from checks.py, never typed."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for name, t in DECLARED_TEXTS.items():
                assert t not in node.value, f"{path.name}:{node.lineno} types {t!r} ({name}): render it"


# ---- sentences agree with their source ---------------------------------------------------------------------

NUM = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?(?:-\d+(?:\.\d+)?)?")


def _declared_numbers() -> set[str]:
    out = set()
    for c in BY_ID.values():
        for b in [c.bound, c.correct] + [v for _, v in c.values if isinstance(v, Bound)]:
            if b is not None:
                out.add(str(b).lstrip("<>= "))
                out |= {checks.num(v) for v in _numbers(b)}
        out |= {checks.num(v) for _, v in c.values if isinstance(v, (int, float))}
    return out


# numbers a sentence may state that are not measured or calibrated: what they are and where they come from
STATED = {"2.565": "ln 13, the loss of uniform logits over the vocabulary", "13": "the vocabulary",
          "0": "zero", "1": "one", "2.5e-6": "lesson_peak / lesson_warmup (asserted below)"}


@pytest.mark.parametrize("section", ["training", "lr-schedule", "rowmax", "overfit", "positional", "causal"])
def test_every_number_in_a_section_introduction_comes_from_a_declaration(section):
    from harness.report.html import INTRO
    allowed = _declared_numbers() | set(STATED)
    found = NUM.findall(INTRO[section].replace("1/sqrt(d_k)", ""))
    stray = [n for n in found if n not in allowed]
    assert not stray, f"{section}: {stray} typed into {INTRO[section]!r}"
    assert checks.num(value("lr-schedule", "lesson_peak") / value("lr-schedule", "lesson_warmup")) == "2.5e-6"


def test_the_report_sentences_change_with_the_declaration(monkeypatch):
    """Not a coincidence of equal numbers: the introductions are rendered from the declarations."""
    import importlib

    import harness.report.intro as html      # the section introductions (report/intro.py)
    monkeypatch.setitem(BY_ID, "overfit", checks.Check("overfit", "x", Bound(hi=0.07), "s",
                                                      values=(("max_steps", 555), ("correct_steps", Range(11, 99)),
                                                              ("lr", 1e-3), ("batch", 8))))
    try:
        importlib.reload(html)
        assert "< 0.07 within 555 steps" in html.INTRO["overfit"] and "11-99" in html.INTRO["overfit"]
    finally:
        monkeypatch.undo()
        importlib.reload(html)


def test_the_figures_draw_and_state_the_declared_ranges():
    from harness.report import figure_attention, figure_training
    sat = BY_ID["attn-saturation"]
    fig = figure_attention.rowmax([0.3, 0.35, 0.4])
    assert str(sat.correct) in fig.alt and str(value("attn-saturation", "unscaled")) in fig.alt
    over = figure_training.overfit([2.0, 1.0, 0.5, 0.04])
    assert f"the pass line is {checks.num(bound('overfit').hi)}" in over.alt
    lr = figure_training.lr_trace({"lr": [1e-6, 5e-4, 1e-3]})
    assert f"over {value('lr-schedule', 'lesson_warmup')} steps" in lr.alt
    curves = figure_training.training({"loss": [3.0] * 30 + [1.0] * value("brief-training", "last"),
                                       "lr": [1e-3] * 50, "grad_norm": [1.0] * 50}, None)
    assert f"last {value('brief-training', 'last')} steps: yours 1" in curves.alt


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: p.stem)
def test_recorded_expected_texts_state_the_declared_thresholds(path):
    """The child's `expected` of every bounded check (recorded, tests/unit/goldens) states the declared bound."""
    g = json.loads(path.read_text())
    for c in (g["payload"] or {}).get("checks", []):
        if c["id"] in BOUNDED and c["status"] in ("pass", "fail") and isinstance(c["measured"], (int, float)):
            assert str(BY_ID[c["id"]].bound) in c["expected"], (g["case"], c["id"], c["expected"])


# ---- one table each ----------------------------------------------------------------------------------------

def test_one_lm_component_table():
    from harness.child.probes.lm.diag import inputs
    from mutants import lm_registry
    assert checks.LM_COMPONENTS == lm_table.NAMES
    assert inputs.COMPONENTS == lm_registry.COMPONENTS == tuple(map(lm_table.registry_name, lm_table.NAMES))
    assert set(inputs.ADAPTER.values()) == set(lm_table.ADAPTER.values())
    assert sorted(lm_table.SEED_ORDER) == sorted(lm_table.NAMES)


def test_lm_component_names_are_written_once():
    """No other module spells the component list out: it imports harness/lm_table.py."""
    names = set(lm_table.NAMES) | {lm_table.registry_name(n) for n in lm_table.NAMES}
    for p in list(HARNESS.rglob("*.py")) + list((ROOT / "mutants").glob("*.py")):
        if p.name == "lm_table.py":
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                strs = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
                assert len(strs & names) < 6, f"{p.relative_to(ROOT)}:{node.lineno} lists lm components: use lm_table"


def test_limit_defaults_are_declared_once():
    from click.testing import CliRunner

    from harness import limits
    from harness.cli.main import main
    from harness.grading.discovery import Options
    from harness.runner import Limits
    assert (Limits().timeout_s, Limits().memory_mb, Limits().load_timeout_s, Limits().output_mb) == \
        (Options().timeout_s, Options().memory_mb, Options().load_timeout_s, Options().output_mb) == \
        (limits.TIMEOUT_S, limits.MEMORY_MB, limits.LOAD_TIMEOUT_S, limits.OUTPUT_MB)
    for cmd in ("check", "watch", "grade"):
        out = CliRunner().invoke(main, [cmd, "--help"], terminal_width=200).output
        assert f"[default: {limits.TIMEOUT_S}]" in out and f"[default: {limits.MEMORY_MB}]" in out, cmd
    gs = CliRunner().invoke(main, ["gradescope", "--help"], terminal_width=200).output
    assert f"[default: {limits.GRADESCOPE_TIMEOUT_S}]" in gs
    for p in (HARNESS / "cli" / "main.py", HARNESS / "grading" / "cli.py", HARNESS / "runner.py",
              HARNESS / "protocol.py", HARNESS / "grading" / "discovery.py"):
        src = p.read_text()
        assert p.name not in ("main.py", "cli.py") or not re.search(r'"--(timeout|memory|load-timeout)"', src), \
            f"{p.name}: use limits.limit_options"
        assert not re.search(r"(timeout_s|memory_mb|load_timeout_s|output_mb): \w+ = \d", src), \
            f"{p.name}: a limit default typed instead of read from harness/limits.py"
