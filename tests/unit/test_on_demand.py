"""Skipped top-level statements a function needs are evaluated on demand when they only build objects; what
would do more (train, load a file) leaves the caller a reason, never a NameError blamed on the student."""
from __future__ import annotations

import pytest

from harness.child import on_demand
from harness.child.loader import load, read_source


class Skip(Exception):
    pass


def _load(tmp_path, text, name):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    src = read_source(str(path), path.read_bytes())
    return src, load(src, module_name=f"od_{name}")


HELPERS = '''import functools, logging
import torch
import torch.nn as nn

LR = 3e-3
make_optimizer = functools.partial(torch.optim.Adam, lr=LR, betas=(0.9, 0.98))
logger = logging.getLogger("run")


def setup_logging(name):
    log = logging.getLogger(name)
    log.setLevel(logging.INFO)
    return log


run_log = setup_logging("other")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)


def train():
    model = Net()
    opt = make_optimizer(model.parameters())
    logger.info("step %d", 1)
    run_log.info("done")
    return opt
'''


def test_a_partial_a_logger_and_a_logging_helper_are_provided(tmp_path):
    src, mod = _load(tmp_path, HELPERS, "helpers")
    skipped = {s["line"] for s in src.skipped}
    assert {6, 7, 16} <= skipped                       # the loader skipped them: their values call code
    opt, done = on_demand.run_needing_names(mod.train, mod.__dict__, src, Skip)
    assert type(opt).__name__ == "Adam" and opt.defaults["lr"] == 3e-3
    assert sorted(e["line"] for e in done) == [6, 7, 16]
    assert all(e["evaluated_on_demand"] for e in done)


DEPENDS = '''import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)


net = Net().to("cpu")
opt = torch.optim.SGD(net.parameters(), lr=0.1)


def step():
    return opt.param_groups[0]["params"][0] is net.lin.weight
'''


def test_a_statement_is_provided_with_the_skipped_names_it_reads(tmp_path):
    src, mod = _load(tmp_path, DEPENDS, "depends")
    ok, done = on_demand.run_needing_names(mod.step, mod.__dict__, src, Skip)
    assert ok is True and [e["line"] for e in done] == [11, 12]


UNSAFE = '''import numpy as np
import torch

data = np.load("digits.npy")


def train_model(steps):
    for _ in range(steps):
        pass
    return 1


trained = train_model(10 ** 9)


def uses_data():
    return data.shape


def uses_trained():
    return trained
'''


def test_file_loads_and_training_are_not_run_the_probe_skips_with_the_line(tmp_path):
    src, mod = _load(tmp_path, UNSAFE, "unsafe")
    with pytest.raises(Skip, match=r"line 4 .*np\.load"):
        on_demand.run_needing_names(mod.uses_data, mod.__dict__, src, Skip)
    with pytest.raises(Skip, match=r"line 13 .*train_model"):
        on_demand.run_needing_names(mod.uses_trained, mod.__dict__, src, Skip)
    assert "data" not in mod.__dict__ and "trained" not in mod.__dict__


def test_a_name_nothing_defines_stays_the_students_name_error(tmp_path):
    src, mod = _load(tmp_path, "def f():\n    return undefined_thing + 1\n", "undefined")
    with pytest.raises(NameError):
        on_demand.run_needing_names(mod.f, mod.__dict__, src, Skip)


REBOUND = '''import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)


def train(net, steps=2):
    for _ in range(steps):
        model(None)
    return model


class Ident(nn.Module):
    def forward(self, x):
        return x


model = Net()
model = train(model)
model = model.eval()
'''


def test_the_last_binding_that_only_builds_is_used_not_the_experiment_after_it(tmp_path):
    src, mod = _load(tmp_path, REBOUND, "rebound")
    got, done = on_demand.run_needing_names(lambda: mod.train(None, steps=0), mod.__dict__, src, Skip)
    assert type(got).__name__ == "Net" and [e["line"] for e in done] == [21]


def test_the_name_is_provided_in_the_module_whose_code_raised(tmp_path):
    """A repository (lm): the function that needs the name lives in another module than the caller's."""
    src_a, mod_a = _load(tmp_path, HELPERS, "repo_a")
    src_b, mod_b = _load(tmp_path, "def call(f):\n    return f()\n", "repo_b")
    opt, done = on_demand.run_needing_names(lambda: mod_b.call(mod_a.train), mod_b.__dict__, [src_b, src_a], Skip)
    assert type(opt).__name__ == "Adam" and "make_optimizer" in mod_a.__dict__
    assert "make_optimizer" not in mod_b.__dict__
