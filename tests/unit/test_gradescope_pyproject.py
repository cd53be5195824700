"""The zip's mtxdiag/pyproject.toml when mtxdiag runs from an installed wheel (no checkout beside the package):
written from the installed distribution's metadata by toml_write, it parses with tomllib and holds the project's
own dependencies, extras, entry points and setuptools tables. The metadata's markers are double-quoted
(`tomli>=2.0; python_version < "3.11"`), the text a repr() and a quote swap once broke into invalid TOML."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.grading import gradescope_build, toml_write
from harness.grading.gradescope_build import _pyproject, pyproject_doc, split_requires
from harness.grading.toml_write import TomlWriteError, tomllib

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _norm(req: str) -> str:
    """One requirement, spelled as metadata and pyproject may differ: quotes and spaces."""
    return re.sub(r"\s+", "", req.replace("'", '"'))


def _requires_dist() -> list[str]:
    """The project's requirements as a wheel's METADATA lists them (Requires-Dist: double-quoted markers,
    an extra's as `; extra == "name"`)."""
    proj = PROJECT["project"]
    out = [r.replace("'", '"') for r in proj["dependencies"]]
    for extra, reqs in proj["optional-dependencies"].items():
        for r in reqs:
            req, _, marker = r.partition(";")
            marker = marker.strip().replace("'", '"')
            out.append(f'{req.strip()}; ({marker}) and extra == "{extra}"' if marker
                       else f'{req.strip()}; extra == "{extra}"')
    return out


def _entry_points() -> list[tuple[str, str, str]]:
    proj = PROJECT["project"]
    eps = [("console_scripts", k, v) for k, v in proj["scripts"].items()]
    return eps + [(g, k, v) for g, table in proj["entry-points"].items() for k, v in table.items()]


class _Dist:
    """What importlib.metadata.distribution("mtxdiag") gives for an installed wheel of this project."""
    version = PROJECT["project"]["version"]
    metadata = {"Requires-Python": PROJECT["project"]["requires-python"]}
    requires = _requires_dist()
    entry_points = [type("EP", (), {"group": g, "name": n, "value": v})() for g, n, v in _entry_points()]


def test_no_checkout_pyproject_parses_and_holds_the_projects_dependencies(tmp_path, monkeypatch):
    import importlib.metadata
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: _Dist())
    site = tmp_path / "site-packages"           # a wheel install: the package's parent has no pyproject.toml
    site.mkdir()
    text = _pyproject(site).decode("utf-8")
    assert 'python_version < \\"3.11\\"' in text         # the marker's quotes escaped inside a TOML string
    doc = tomllib.loads(text)                   # the TOMLDecodeError setup.sh met
    proj, want = doc["project"], PROJECT["project"]
    assert sorted(map(_norm, proj["dependencies"])) == sorted(map(_norm, want["dependencies"]))
    assert {k: sorted(map(_norm, v)) for k, v in proj["optional-dependencies"].items()} == \
        {k: sorted(map(_norm, v)) for k, v in want["optional-dependencies"].items()}
    assert proj["name"] == "mtxdiag" and proj["version"] == want["version"]
    assert proj["requires-python"] == want["requires-python"]
    assert proj["scripts"] == want["scripts"] and proj["entry-points"] == want["entry-points"]
    assert doc["tool"]["setuptools"] == PROJECT["tool"]["setuptools"]     # packages and package data
    assert doc["build-system"]["build-backend"] == PROJECT["build-system"]["build-backend"]


def test_the_installed_distributions_metadata_gives_a_valid_pyproject(tmp_path):
    """Whatever mtxdiag is installed here (its real importlib.metadata), the fallback parses."""
    doc = tomllib.loads(_pyproject(tmp_path).decode("utf-8"))
    assert doc["project"]["name"] == "mtxdiag" and doc["project"]["dependencies"]


def test_a_checkout_ships_its_own_pyproject_and_another_projects_is_ignored(tmp_path):
    assert _pyproject(ROOT) == (ROOT / "pyproject.toml").read_bytes()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "someone-else"\n')
    assert tomllib.loads(_pyproject(tmp_path).decode())["project"]["name"] == "mtxdiag"


def test_split_requires_reads_extras_and_keeps_other_markers():
    deps, extras = split_requires(['tomli>=2.0; python_version < "3.11"', 'pytest>=7; extra == "test"',
                                   'x>=1; (python_version < "3.12") and extra == "lm"',
                                   'y; extra == "lm" and sys_platform == "linux"'])
    assert deps == ['tomli>=2.0; python_version < "3.11"']
    assert extras == {"test": ["pytest>=7"], "lm": ['x>=1; (python_version < "3.12")', 'y; sys_platform == "linux"']}


def test_pyproject_doc_round_trips_hostile_strings():
    doc = pyproject_doc('1.0"\\\n', None, ['a; python_version < "3.11"', "b\t\x01\u00e9\u2028z"],
                        [("console_scripts", "my tool", 'harness.cli.main:main"')])
    back = tomllib.loads(toml_write.dumps(doc))
    assert back["project"]["version"] == '1.0"\\\n' and "requires-python" not in back["project"]
    assert back["project"]["dependencies"] == ['a; python_version < "3.11"', "b\t\x01\u00e9\u2028z"]
    assert back["project"]["scripts"] == {"my tool": 'harness.cli.main:main"'}


def test_toml_writer_escapes_and_quotes():
    doc = {"a": 'q"uote\\back', "b": [1, 2.5, True, "x\ny"], "key with space": "v", "": 0,
           "t": {"u": {"deep": -3}, "empty": {}}, "arr": [[1], ["a"]]}
    text = toml_write.dumps(doc)
    assert tomllib.loads(text) == doc
    assert '"key with space" = "v"' in text and "[t.empty]" in text and "[t.u]" in text
    assert toml_write.string("\x7f\x1b") == '"\\u007F\\u001B"'


@pytest.mark.parametrize("bad", [{"x": float("nan")}, {"x": object()}, {"x": "\udcff"}, {1: "a"},
                                 {"x": [{"inline": 1}]}])
def test_toml_writer_refuses_what_it_cannot_write(bad):
    with pytest.raises(TomlWriteError):
        toml_write.dumps(bad)


def test_the_lm_rubrics_appended_table_is_written_by_the_writer():
    from harness.grading import rubric
    own = rubric.parse('name = "mine"\nmax_score = 50\n')
    text = gradescope_build._lm_rubric('name = "mine"\nmax_score = 50\n', own)
    assert rubric.parse(text).lm == rubric.load().lm
