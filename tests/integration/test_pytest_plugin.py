"""`pytest --mtxdiag` (harness/pytest_plugin.py) on a tiny student repository built from a corpus bug:
the failing adapter test gets mtxdiag's diagnosis of its component under it, passing and unrelated
tests get none, and without the option the plugin adds nothing."""
from __future__ import annotations

from pathlib import Path

import pytest


pytest_plugins = "pytester"

ROOT = Path(__file__).resolve().parents[2]
BUG = ROOT / "tests" / "corpus" / "lm" / "bugs" / "rope_halves.py"

COURSE_TESTS = '''
import torch
from reference_model import lm_adapters as ref
from .adapters import run_linear, run_rope


def _g():
    return torch.Generator().manual_seed(0)


def test_rope():
    x = torch.randn(2, 5, 16, generator=_g())
    pos = torch.arange(5)
    assert torch.allclose(run_rope(16, 10000.0, 32, x, pos), ref.run_rope(16, 10000.0, 32, x, pos), atol=1e-6)


def test_linear():
    w, x = torch.randn(4, 8, generator=_g()), torch.randn(3, 8, generator=_g())
    assert torch.allclose(run_linear(8, 4, w, x), ref.run_linear(8, 4, w, x), atol=1e-6)


def test_unrelated_helper():
    assert 1 == 2
'''


@pytest.fixture
def repo(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    # only the plugin under test: an installed mtxdiag also registers it through its pytest11 entry point
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.mkpydir("tests")
    (pytester.path / "tests" / "adapters.py").write_text(BUG.read_text())
    (pytester.path / "tests" / "test_model.py").write_text(COURSE_TESTS)
    return pytester


def test_failing_adapter_test_shows_the_diagnosis(repo):
    result = repo.runpytest_subprocess("-p", "harness.pytest_plugin", "--mtxdiag", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    assert "mtxdiag diagnosis" in out
    assert "mtxdiag: rope fails - rope-halves-not-pairs (confidence 0.95)" in out
    assert "equals the reference with the edit" in out
    # only the rope test is diagnosed: linear passed, the helper test is no component's
    assert out.count("mtxdiag: ") == 1
    assert "rope: fail, rope-halves-not-pairs at tests/adapters.py:" in out     # the terminal summary
    # file:line of the student's rope code, and the fix
    line = next(i for i, l in enumerate(BUG.read_text().splitlines(), start=1)
                if l.strip().startswith("def forward") and i > _class_line("Rotary"))
    assert f"  at  tests/adapters.py:{line} (forward)" in out, out
    assert "  fix " in out and "  fix: " in out


def _class_line(*names) -> int:
    return next(i for i, l in enumerate(BUG.read_text().splitlines(), start=1)
                if any(l.startswith(f"class {n}") for n in names))


def test_without_the_option_nothing_is_added(repo):
    result = repo.runpytest_subprocess("-p", "harness.pytest_plugin", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
    assert "mtxdiag" not in result.stdout.str()


