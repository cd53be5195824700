"""Top-level code the loader skipped that fails when the file runs as a script (a module-level raise, a file
it reads that is not beside the submission) is an `info` finding with its line; the verdict stays clean."""
from __future__ import annotations

from harness import engine
from harness.child.loader import filter_module, read_source

TEXT = '''import numpy as np
import torch

SIZE = 4


def f(x):
    return x


data = np.loadtxt("digits.txt")
kept = np.loadtxt("present.txt")
with open("out.log", "w") as fh:
    fh.write("x")
raise NotImplementedError("train below")

if __name__ == "__main__":
    torch.manual_seed(0)
    raise SystemExit(f(1))
'''


def test_a_raise_and_a_missing_file_are_noted_with_their_lines(tmp_path):
    path = tmp_path / "student.py"
    path.write_text(TEXT)
    (tmp_path / "present.txt").write_text("1 2 3\n")
    src = read_source(str(path), path.read_bytes())
    filter_module(src)
    d = engine._script_failures(src.skipped, str(path))
    lines = sorted(x["location"]["line"] for x in d)
    assert lines == [11, 15, 19]             # not the file that exists, not the file written
    assert all(x["id"] == "script-fails" and x["severity"] == "info" for x in d)
    assert engine.verdict(d) == "clean"
    assert any("digits.txt" in x["evidence"][0] for x in d)
