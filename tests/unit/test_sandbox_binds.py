"""What the sandbox binds (issue 27 item 1): every folder the interpreter imports from, whatever the install
kind, never the repository checkout or the folder the command started in; mtxdiag's own installed packages
are masked (the child reads the .py snapshot)."""
from __future__ import annotations

import os
import sys

from harness.isolation import sandbox


def _under(p, q):
    return p == q or p.startswith(q.rstrip(os.sep) + os.sep)


def _site(tmp_path, *parts):
    site = tmp_path.joinpath(*parts)
    for pkg in ("harness", "reference_model", "mutants", "torch"):
        (site / pkg).mkdir(parents=True)
    return site


def test_a_user_site_install_is_bound_and_its_mtxdiag_packages_masked(tmp_path, monkeypatch):
    home = tmp_path / "home"
    site = _site(home, ".local", "lib", "python3.11", "site-packages")
    classes = tmp_path / "classes"
    classes.mkdir()
    monkeypatch.setattr(sandbox, "_package_root", lambda: site)
    monkeypatch.setattr(sys, "path", [str(classes)] + [p for p in sys.path if p] + [str(site)])
    monkeypatch.chdir(classes)
    bound = sandbox._python_dirs()
    assert any(_under(str(site / "torch"), b) for b in bound), bound
    assert not any(_under(str(home), b) for b in bound), bound               # the site folder, not the home
    assert not any(_under(str(classes), b) for b in bound), "the folder the command started in is bound"
    assert set(sandbox._mask_dirs(bound)) == {str(site / p) for p in ("harness", "reference_model", "mutants")}


def test_a_venv_whose_lib_holds_the_packages_is_bound(tmp_path, monkeypatch):
    venv = tmp_path / "venv"
    site = _site(venv, "lib", "python3.11", "site-packages")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    monkeypatch.setattr(sandbox, "_package_root", lambda: site)
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "exec_prefix", str(venv))
    monkeypatch.setattr(sys, "path", ["/nonexistent"] + [p for p in sys.path if p] + [str(site)])
    bound = sandbox._python_dirs()
    assert any(_under(str(site / "torch"), b) for b in bound), bound        # the bug: lib/ was left out
    assert any(_under(str(venv / "pyvenv.cfg"), b) for b in bound)
    assert str(site / "harness") in sandbox._mask_dirs(bound)


def test_a_checkout_is_never_bound(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "harness").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("")
    monkeypatch.setattr(sandbox, "_package_root", lambda: repo)
    monkeypatch.setattr(sys, "path", [str(repo)] + [p for p in sys.path if p] + [str(repo)])
    bound = sandbox._python_dirs()
    assert not any(_under(str(repo), b) or _under(b, str(repo)) for b in bound), bound
    assert sandbox._mask_dirs(bound) == []


def test_the_temporary_folder_is_never_an_import_folder_bound_into_a_sandbox(monkeypatch, tmp_path):
    """A grading process with /tmp on sys.path (a script of the instructor's, a PYTHONPATH entry) must not bind
    the host's /tmp (every run's /tmp/mtxdiag-* folder) into every sandbox; a folder below it (a venv made there)
    still is bound."""
    import tempfile
    venv_site = tmp_path / "venv" / "lib" / "site-packages"
    venv_site.mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [sys.path[0], "/tmp", tempfile.gettempdir(), str(venv_site)] + sys.path[1:])
    dirs = sandbox._import_dirs()
    assert "/tmp" not in dirs and os.path.realpath(tempfile.gettempdir()) not in dirs, dirs
    assert os.path.realpath(venv_site) in dirs
