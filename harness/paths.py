"""The parent never trusts a path the child names.

A result's locations (`{"file": ..., "line": ...}` in checks, the load failure, diagnoses' data) are read on
the host afterwards: the terminal summary and the HTML report open `location.file` to show the line. A
forged result could name any host file there (`/etc/shadow`, the rubric, another student's submission) and
have it printed. `confine_locations()` keeps only files of the submission's copy, under the name the user
gave it: the name shown for a file submission, or that name + "/" + the relative path of a regular file the
parent copied from the repository (`submission_files()`, listed before any of the child's code ran). Anything else loses its `file` (set to None) and is returned as a problem to report.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from .readable import cut

MAX_NODES = 200_000


def submission_files(copy: Path, shown: str) -> frozenset:
    """The names a location may carry, listed by the parent right after it copied the submission (before any
    of its code ran): `shown`, and for a repository `shown/<rel>` for each regular file it copied."""
    names = {shown}
    if copy.is_dir():
        prefix = shown.rstrip("/") + "/"
        for root, dirs, files in os.walk(copy, followlinks=False):
            for f in files:
                p = Path(root) / f
                try:
                    if stat.S_ISREG(os.lstat(p).st_mode):
                        names.add(prefix + p.relative_to(copy).as_posix())
                except (OSError, ValueError):
                    continue
            if len(names) > MAX_NODES:
                break
    return frozenset(names)


def confine_locations(result, allowed: frozenset) -> list[str]:
    """Drop (set to None) every `file` of a location in `result` that is not the submission's; what was dropped."""
    dropped: list[str] = []
    stack, seen = [(result, 0)], 0
    while stack and seen < MAX_NODES:
        node, depth = stack.pop()
        seen += 1
        if isinstance(node, dict):
            f = node.get("file")
            if f is not None and ("line" in node or "cell" in node) and not (isinstance(f, str) and f in allowed):
                node["file"] = None
                if len(dropped) < 10:
                    dropped.append(f"a location named a file outside the submission ({cut(f, 120)!r}); dropped")
            if depth < 40:
                stack.extend((v, depth + 1) for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list) and depth < 40:
            stack.extend((v, depth + 1) for v in node if isinstance(v, (dict, list)))
    return dropped
