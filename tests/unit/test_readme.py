"""README stays what a newcomer reads in five minutes (issue 44 item 7): at most 300 lines, the two set-up
commands (install and check the bundled example; run the tests), and every document it sends the reader to
exists. The details live in docs/."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_is_short():
    assert len(README.splitlines()) <= 300


def test_readme_has_the_two_set_up_commands():
    setup = README.split("## Set up", 1)[1].split("\n## ", 1)[0]
    commands = [ln.strip() for ln in setup.splitlines() if ln.startswith("    ") and ln.strip()]
    assert len(commands) == 2, commands
    assert "pip install" in commands[0] and "mtxdiag check submissions/" in commands[0]
    assert "pip install -e '.[test]'" in commands[1] and "python -m pytest" in commands[1]
    assert (ROOT / commands[0].rsplit(" ", 1)[1]).exists()      # the bundled example it checks


def test_every_linked_document_exists():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    assert "docs/guide.md" in links and "docs/causes.md" in links
    assert [p for p in links if not p.startswith("http") and not (ROOT / p).exists()] == []


def test_ci_runs_the_readme_test_command():
    """CI (.ci/run) runs README's test command with the same pytest options (it adds only -q and no cache)."""
    setup = README.split("## Set up", 1)[1].split("\n## ", 1)[0]
    tests = [ln.strip() for ln in setup.splitlines() if ln.startswith("    ") and "pytest" in ln][0]
    options = tests.split("python -m pytest", 1)[1].split()
    ci = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines() if "python -m pytest" in ln][-1]
    ci_options = ci.split("python -m pytest", 1)[1].split()
    assert options and ci_options[:len(options)] == options, (options, ci_options)
