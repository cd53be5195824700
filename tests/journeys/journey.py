"""What the journeys share: a bundled example copied to the user's folder, and the scan of what a user reads
(no `None`, no `nan`, no text cut mid-word: tests/output_scan.py)."""
from __future__ import annotations

import shutil
from pathlib import Path

from installed import ROOT


def copy_example(name: str, dest: Path) -> Path:
    src = ROOT / "submissions" / name
    if src.is_dir():
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        shutil.copy(src, dest)
    return dest


def _fail_on(problems: list[str], what: str) -> None:
    assert not problems, f"{what}: " + "\n".join(problems[:20])


def assert_readable(text: str, what: str, sources: tuple = ()) -> None:
    """A terminal's text (a summary, a grading run's progress) reads well."""
    from output_scan import scan
    _fail_on(scan(terminal=text, sources=list(sources)), what)


def assert_html_readable(html: str, what: str, sources: tuple = ()) -> None:
    from output_scan import scan
    _fail_on(scan(html=html, sources=list(sources)), what)


def assert_report_readable(json_path: Path, html_path: Path, sources: tuple = ()) -> None:
    """A check's JSON result and HTML report read well (both written, both readable)."""
    import json

    from output_scan import scan
    _fail_on(scan(html=html_path.read_text(encoding="utf-8"), result=json.loads(json_path.read_text()),
                  sources=list(sources)), f"{json_path.name} / {html_path.name}")


def mutant_file(folder: Path, mutant_id: str) -> Path:
    """The exported file of a mutant (`mtxdiag mutants export` names them blind; its manifest says which is which)."""
    import json
    manifest = json.loads((folder / "manifest.json").read_text())
    (name,) = [n for n, m in manifest.items() if m["id"] == mutant_id]
    return folder / name
