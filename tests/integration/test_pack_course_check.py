"""Through `mtxdiag check FOLDER` as a user runs it: a CS231n mutant's assignment folder (mutants/packs.py) whose
bug the course's own checks cannot see (the value projection fed the key input: the course's attention checks
pass key == value) says so in the terminal, the JSON (Diagnosis.course_invisible) and the HTML report; one they
do see (the inverted mask) does not."""
from __future__ import annotations

import html as html_lib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.packs.course import NO_CHECK, UNSEEN
from mutants import get_any, packs

ROOT = Path(__file__).resolve().parents[2]


def _check(tmp_path: Path, mutant_id: str):
    folder = packs.write_folder(tmp_path / mutant_id, packs.folder_files(get_any(mutant_id)))
    env = dict(os.environ, COLUMNS="200", PYTHONPATH=str(ROOT), MTXDIAG_DAEMON="0")
    page = tmp_path / f"{mutant_id}.html"
    proc = subprocess.run([sys.executable, "-m", "harness", "check", str(folder), "--quick", "--no-daemon",
                           "--json", "-", "--html", str(page)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env=env)
    assert proc.returncode == 1, proc.stderr[-2000:]
    return json.loads(proc.stdout), proc.stderr, html_lib.unescape(page.read_text())


@pytest.mark.parametrize("mutant_id,invisible", [("cs231n-value-from-key", True), ("cs231n-mask-inverted", False)])
def test_the_report_says_whether_the_courses_checks_would_have_seen_it(tmp_path, mutant_id, invisible):
    result, terminal, page = _check(tmp_path, mutant_id)
    top = result["diagnoses"][0]
    assert result["assignment"] == "cs231n" and top["id"] == get_any(mutant_id).cause
    assert top["component"] == "MultiHeadAttention" and top["course_invisible"] is invisible
    replay = next(c for c in result["checks"] if c["id"] == "MultiHeadAttention.course")
    assert replay["status"] == "info" and replay["data"]["course_calls"]["visible"] is (not invisible)
    assert (UNSEEN in terminal) is invisible
    assert (UNSEEN[1:] in page) is invisible


def test_a_piece_the_course_never_checks_is_said_so_through_the_split_path(tmp_path, monkeypatch):
    """FeedForwardNetwork (Binding.course = NO_COURSE_CHECK) with its dropout always on: through the model server
    and the prober (the split path, forced on), every late piece the 2025 notebook checks is replayed and passes
    (they run in training mode), the feed-forward's own replay says the course runs no check of it, and the
    report says the course's own checks would not have seen the bug."""
    monkeypatch.setenv("MTXDIAG_PACK_SPLIT", "1")
    result, terminal, page = _check(tmp_path, "cs231n-ffn-dropout-in-eval")
    top = result["diagnoses"][0]
    assert top["id"] == get_any("cs231n-ffn-dropout-in-eval").cause and top["component"] == "FeedForwardNetwork"
    assert top["course_invisible"] is True and UNSEEN in terminal
    replays = {c["id"][:-len(".course")]: c for c in result["checks"] if c["id"].endswith(".course")}
    assert replays["FeedForwardNetwork"]["data"]["course_calls"] == {"visible": False, "calls": [], "unchecked": True}
    late = ("TransformerDecoderLayer", "TransformerEncoderLayer", "PatchEmbedding", "VisionTransformer")
    assert all(replays[c]["status"] == "info" and replays[c]["data"]["course_calls"]["calls"] and
               not replays[c]["data"]["course_calls"]["visible"] for c in late)
    assert f"{UNSEEN}: {NO_CHECK}" in top["evidence"] and f"{UNSEEN}: {NO_CHECK}" in terminal
