"""The bundled lm example repository checks clean, every component passing (README's line for it)."""
from pathlib import Path

from harness.api import check_file

ROOT = Path(__file__).resolve().parents[2]


def test_the_lm_example_repository_is_clean():
    result = check_file(ROOT / "submissions" / "lm_example", assignment="lm", quick=True)
    assert result["verdict"] == "clean", [d["id"] for d in result["diagnoses"]]
    assert not [c["id"] for c in result["checks"] if c["status"] in ("fail", "error")]
