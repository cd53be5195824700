"""Build submissions/reversal_lesson.ipynb from submissions/reversal_lesson.py.

The .py file is the source of truth. It is split into cells at its
"# %%" markers (the VS Code / jupytext "percent" format):

    # %% [markdown]      a markdown cell; its lines lose the leading "# "
    # %%                 a code cell

Text before the first marker is dropped (it describes the file, not the
lesson) and replaced by a title cell. In code cells a commented-out IPython
magic or shell line ("# %matplotlib inline", "# !pip ...") is uncommented,
since a .py file cannot hold it as code. Cell ids are deterministic so that
regenerating an unchanged file gives a byte-identical notebook.

    python submissions/make_notebook.py           # (re)write the notebook
    python submissions/make_notebook.py --check   # exit 1 if it is out of date
"""
import re
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "reversal_lesson.py"
TARGET = HERE / "reversal_lesson.ipynb"
TITLE = "# Implementing a Mini Transformer from Scratch"

_MARKER = re.compile(r"^# %%(?:\s+\[(\w+)\])?\s*$")
_COMMENTED_MAGIC = re.compile(r"^# ([%!]\S.*)$")


def split_cells(text):
    """[(kind, [lines])] for the text after the first marker."""
    cells, kind, lines = [], None, []
    for line in text.splitlines():
        m = _MARKER.match(line)
        if m:
            if kind is not None:
                cells.append((kind, lines))
            kind, lines = (m.group(1) or "code"), []
        elif kind is not None:
            lines.append(line)
    if kind is not None:
        cells.append((kind, lines))
    return cells


def _strip_blank_edges(lines):
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def build(text):
    nb = new_notebook()
    nb.nbformat, nb.nbformat_minor = 4, 5
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    cells = [new_markdown_cell(TITLE)]
    for kind, lines in split_cells(text):
        lines = _strip_blank_edges(lines)
        if not lines:
            continue
        if kind == "markdown":
            body = "\n".join(re.sub(r"^# ?", "", ln) for ln in lines)
            cells.append(new_markdown_cell(body))
        else:
            body = "\n".join(
                (_COMMENTED_MAGIC.match(ln).group(1) if _COMMENTED_MAGIC.match(ln) else ln)
                for ln in lines)
            cells.append(new_code_cell(body))
    for i, cell in enumerate(cells):
        cell["id"] = f"cell-{i:02d}"
    nb.cells = cells
    nbformat.validate(nb)
    return nb


def render(nb):
    return nbformat.writes(nb, version=4) + "\n"


def main(argv):
    out = render(build(SOURCE.read_text()))
    if "--check" in argv:
        current = TARGET.read_text() if TARGET.exists() else ""
        if current != out:
            print(f"{TARGET.name} is out of date; run {Path(__file__).name}")
            return 1
        print(f"{TARGET.name} is up to date")
        return 0
    TARGET.write_text(out)
    print(f"wrote {TARGET} ({len(nbformat.reads(out, as_version=4).cells)} cells)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
