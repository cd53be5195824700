"""What an instructor adds to the autograder zip (`mtxdiag gradescope build`): --files, --requirements, --points.

--files PATH: a file or folder the student's code reads (data, a helper module), shipped under the zip's files/
and copied into every run's folder beside the submission (isolation/support_files.py holds the rules both sides
apply: no links, no name the run folder uses, limits.SUPPORT_MB and SUPPORT_FILES in all).

--requirements FILE: pip requirement lines (a name, extras, version specifiers, a marker, or `name @ URL`),
shipped as requirements.txt and installed by setup.sh after mtxdiag with constraints.txt holding torch at the
grader's pin, so that no requirement replaces it. Refused: options (-e, -r, -c, --index-url, ...: the zip holds
neither the other files nor the source, and indexes are setup.sh's), local paths and file: URLs (not in the
container), a bare URL (give it a name), and torch itself. A `name @ URL` is fetched when Gradescope builds the
image: only from a place the instructor trusts.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..isolation.support_files import SupportError, collect

FILES_DIR = "files"                  # in the zip; /autograder/source/files on Gradescope
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_SPEC = r"(?:~=|===|==|!=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+"
_SPECS = rf"{_SPEC}(?:\s*,\s*{_SPEC})*"
_REQ = re.compile(rf"""^(?P<name>{_NAME})\s*(?:\[\s*{_NAME}(?:\s*,\s*{_NAME})*\s*\])?\s*
    (?:@\s*(?P<url>(?:https?|git\+https|git\+ssh)://\S+)\s*|\(\s*{_SPECS}\s*\)|{_SPECS})?\s*
    (?:;\s*(?P<marker>\S.*))?$""", re.X)
_PATH = re.compile(r"^(?:\.{1,2}[/\\]|[/\\~]|[A-Za-z]:[/\\])|\bfile:")
_ARCHIVE = re.compile(r"\.(?:whl|zip|tar\.gz|tgz|tar\.bz2)$")


def _local(req: str) -> bool:
    """A path on the instructor's machine: ./pkg, /abs, ~/x, C:\\x, file:..., or an archive named without a URL."""
    return bool(_PATH.search(req)) or ("://" not in req and bool(_ARCHIVE.search(req)))


class ExtrasError(ValueError):
    """An extra the zip cannot ship; the message says why."""


def canonical_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _lines(text: str):
    """(line number, requirement text) with comments and continuations as pip reads them."""
    buf, start = "", 0
    for i, raw in enumerate(text.splitlines(), start=1):
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not buf:
            start = i
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        if buf.strip():
            yield start, buf.strip()
        buf = ""
    if buf.strip():
        yield start, buf.strip()


def requirements(path: Path) -> str:
    """The requirements file's text once every line is one the container can install; ExtrasError otherwise."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ExtrasError(f"cannot read the requirements file {path}: {e}") from None
    names = 0
    for n, line in _lines(text):
        where = f"{path} line {n}: {line[:80]!r}"
        if line.startswith("-"):
            opt = line.split()[0].split("=")[0]
            why = {"-e": "an editable install needs its source, which is not in the container",
                   "--editable": "an editable install needs its source, which is not in the container",
                   "-r": "the other file is not in the zip: put its lines in this one",
                   "--requirement": "the other file is not in the zip: put its lines in this one",
                   "-c": "setup.sh sets the constraints (torch at its pin)",
                   "--constraint": "setup.sh sets the constraints (torch at its pin)"}.get(
                opt, "pip options (indexes, find-links, hashes, ...) are not supported: one requirement per line")
            raise ExtrasError(f"{where}: {why}")
        if _local(line.split(";")[0].strip()):
            raise ExtrasError(f"{where}: a local path or file: URL does not exist in Gradescope's container; "
                              f"publish the package or ship its code with --files")
        m = _REQ.match(line)
        if m is None:
            if re.match(r"^[a-z+]+://", line):
                raise ExtrasError(f"{where}: a bare URL; write it as `name @ URL`")
            raise ExtrasError(f"{where}: not a requirement (a name, optional [extras], version specifiers such as "
                              f">=1.2,<2, a `; marker`, or `name @ URL`)")
        if canonical_name(m.group("name")) == "torch":
            raise ExtrasError(f"{where}: setup.sh installs torch at the grader's pin (its CPU build); leave it out")
        names += 1
    if not names:
        raise ExtrasError(f"{path} holds no requirement")
    return text if text.endswith("\n") else text + "\n"


def files(paths) -> list[tuple[Path, str]]:
    """(path, name in the zip) of each extra file: files/<name>, a folder as files/<folder>/...; ExtrasError for
    a path that is not there, a link, a name the run folder uses, a clash, or too much."""
    try:
        found = collect(paths)
    except SupportError as e:
        raise ExtrasError(f"--files {e}") from None
    if not found:
        raise ExtrasError("--files gave no file (only empty folders)")
    return [(p, f"{FILES_DIR}/{rel}") for p, rel in found]
