"""What happens when the student runs their file as a script: top-level code the loader skipped that fails.

The loader runs definitions only, so a module-level `raise`, or an `open("data.txt")` of a file that is not
beside the submission, never runs in a check: the file comes back clean while `python file.py` crashes. This
reads the skipped statements (their text, as the child reported them: parsed here, never run) and names such
code as an `info` finding with its line. Parent side and torch-free.
"""
from __future__ import annotations

import ast
from pathlib import Path

# calls that read a file given as their first argument (a literal path is checked beside the submission)
READERS = {"open", "np.load", "numpy.load", "np.loadtxt", "numpy.loadtxt", "np.genfromtxt", "torch.load",
           "pd.read_csv", "pandas.read_csv", "pd.read_json", "json.load", "pickle.load"}


def _dotted(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def _runs_unconditionally(stmt: ast.stmt) -> list[ast.stmt]:
    """The statements a script executes for sure: the top level, and the body of `if __name__ == "__main__"`."""
    if isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Compare) and \
            isinstance(stmt.test.left, ast.Name) and stmt.test.left.id == "__name__":
        return list(stmt.body)
    return [stmt]


def _read_mode(call: ast.Call) -> bool:
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
    return mode is None or (isinstance(mode, ast.Constant) and isinstance(mode.value, str)
                            and not any(c in mode.value for c in "wax+"))


def _safe_relative(p: str) -> bool:
    return 0 < len(p) < 300 and "\x00" not in p and not Path(p).is_absolute() and ".." not in Path(p).parts


def failures(skipped: list[dict], submission: str) -> list[tuple[int, str]]:
    """(line, what fails) for skipped top-level code that fails when the file runs as a script."""
    folder = Path(submission).resolve().parent
    out = []
    for entry in skipped[:500]:
        code, first = entry.get("code"), entry.get("line")
        if not isinstance(code, str) or not isinstance(first, int):
            continue
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue              # a statement cut at 2,000 characters, or a notebook magic
        for top in tree.body:
            for stmt in _runs_unconditionally(top):
                line = first + stmt.lineno - 1
                if isinstance(stmt, ast.Raise):
                    exc = ast.unparse(stmt.exc)[:120] if stmt.exc is not None else "the current exception"
                    out.append((line, f"the top level raises {exc}"))
                    break
                for sub in ast.walk(stmt):
                    if isinstance(sub, ast.Call) and _dotted(sub.func) in READERS and sub.args and \
                            isinstance(sub.args[0], ast.Constant) and isinstance(sub.args[0].value, str) and \
                            _read_mode(sub) and _safe_relative(sub.args[0].value) and \
                            not (folder / sub.args[0].value).exists():
                        out.append((first + sub.lineno - 1, f"{_dotted(sub.func)}({sub.args[0].value!r}) reads a "
                                    f"file that is not beside the submission"))
                        break
    return out
