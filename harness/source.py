"""A submission's text as both sides read it, torch-free: a .py or a notebook flattened to Python source with
a map back to its cells (`read_source`), the error that says why it cannot be read, and which folders of a
repository hold no code. The child loads from it (loader.py, lm_loader.py); the parent scans the same text
for tampering (runner._static_findings) and copies a repository by the same rules (repo_copy.py), without
importing the child's loaders.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

# folders of an `lm` repository that hold no code of the submission: anywhere, and at its top
SKIP_ANYWHERE = {".git", ".venv", "venv", "__pycache__", "node_modules", "site-packages", ".tox", ".mypy_cache",
                 ".pytest_cache"}
SKIP_DIRS = SKIP_ANYWHERE | {"env", "build", "dist", "wandb", "data", "checkpoints", "outputs"}


@dataclass
class Source:
    """A submission flattened to Python source, with a map back to notebook cells."""
    path: str                # the file name shown to the user
    text: str
    # line in `text` (1-based) -> (cell number 1-based, line in cell 1-based); None for .py
    cell_map: dict[int, tuple[int, int]] | None = None
    skipped: list[dict] = field(default_factory=list)
    run_path: str | None = None  # the copy that actually runs (frames carry this name)
    # skipped top-level statements as parsed, with their `skipped` entry: on_demand.py evaluates the cheap,
    # safe ones when a function of the student's needs a name only they bind
    deferred: list = field(default_factory=list, repr=False, compare=False)

    @property
    def code_path(self) -> str:
        return self.run_path or self.path

    def where(self, line: int) -> dict:
        """A location dict for a line of the flattened text."""
        if self.cell_map is None:
            return {"file": self.path, "line": int(line)}
        cell, cell_line = self.cell_map.get(int(line), (None, int(line)))
        return {"file": self.path, "line": int(line), "cell": cell, "cell_line": cell_line}


class SubmissionError(Exception):
    """The submission cannot be loaded: carries a finding-ready message and line."""

    def __init__(self, kind: str, message: str, line: int | None = None, detail: str = ""):
        super().__init__(message)
        self.kind, self.message, self.line, self.detail = kind, message, line, detail


def read_source(path: str, raw: bytes) -> Source:
    """Decode a .py or .ipynb submission into a Source."""
    try:
        text = raw.decode("utf-8-sig")  # a BOM (Windows editors) is not code
    except UnicodeDecodeError as e:
        raise SubmissionError("unreadable", f"the file is not UTF-8 text ({e.reason} at byte {e.start})")
    if not path.endswith(".ipynb"):
        return Source(path, text)
    try:
        nb = json.loads(text)
        cells = nb["cells"]
        assert isinstance(cells, list)
    except Exception:
        raise SubmissionError("unreadable", "the notebook is not valid nbformat-4 JSON (no list of cells)")
    lines, cell_map, skipped = [], {}, []
    for n, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else str(src)
        # A cell magic (%%bash, %%html, %%writefile ...) makes the whole cell non-Python;
        # %%time / %%capture cells hold Python after their first line.
        first = src.lstrip().split("\n", 1)[0]
        whole_cell = first.startswith("%%") and first.split()[0] not in ("%%time", "%%timeit", "%%capture")
        for k, line in enumerate(src.splitlines(), start=1):
            stripped = line.lstrip()
            if whole_cell or stripped.startswith(("%", "!")):
                skipped.append({"line": len(lines) + 1, "end_line": len(lines) + 1, "cell": n,
                                "code": line, "reason": "notebook magic or shell command"})
                line = ""  # keep the line so numbering stays aligned
            lines.append(line)
            cell_map[len(lines)] = (n, k)
        lines.append("")  # a cell boundary never joins two statements
        cell_map[len(lines)] = (n, 0)
    return Source(path, "\n".join(lines) + "\n", cell_map, skipped)


def code_cell_numbers(raw: bytes) -> dict[int, int]:
    """A notebook's cells as a student counts them: {cell's place among all cells, markdown included (the
    location's "cell", 1-based): its place among the code cells only (1-based)}; {} when it is no notebook."""
    try:
        cells = json.loads(raw.decode("utf-8-sig"))["cells"]
    except Exception:
        return {}
    if not isinstance(cells, list):
        return {}
    code = [n for n, c in enumerate(cells, start=1) if isinstance(c, dict) and c.get("cell_type") == "code"]
    return {n: k for k, n in enumerate(code, start=1)}
