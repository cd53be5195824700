"""The lm reference's exported forms (repository, single file) run in a child like the reference; the reference in-process: tests/unit/test_lm_reference.py."""
from __future__ import annotations

import os
import subprocess
import sys
import torch
from mutants.lm_export import reference_repo_files, reference_single_file
from reference_model import lm_adapters as A

from test_lm_reference import _g  # noqa: F401, F811 (fixtures, helpers)


def test_exported_forms_run_like_the_reference(tmp_path):
    namespace: dict = {}
    exec(compile(reference_single_file(), "single.py", "exec"), namespace)
    x = torch.randn(2, 6, 16, generator=_g(40))
    pos = torch.tensor([[4, 5, 6, 9, 10, 11]] * 2)
    ws = [torch.randn(16, 16, generator=_g(41 + i)) / 4 for i in range(4)]
    expected = A.run_multihead_self_attention_with_rope(16, 4, 32, 10000.0, *ws, x, pos)
    got = namespace["run_multihead_self_attention_with_rope"](16, 4, 32, 10000.0, *ws, x, pos)
    assert torch.equal(got, expected)
    for path, text in reference_repo_files().items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    code = ("import torch; from tests.adapters import run_softmax, run_get_lr_cosine_schedule as s; "
            "print(float(run_softmax(torch.tensor([0.0, 0.0]), 0)[0]), s(5, 1.0, 0.1, 10, 30))")
    env = {**os.environ, "PYTHONPATH": "", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0.5", "0.5"]
