"""Context.construction_sites (probes/base.py): the student's line that built each of their modules."""
from __future__ import annotations

import textwrap

import torch

from harness.child.loader import load, read_source
from harness.child.probes.base import Context

FILE = textwrap.dedent("""\
    import torch.nn as nn

    class Leaf(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

    class Base(nn.Module):
        def __init__(self):
            super().__init__()

    class NoInit(Base):
        pass

    class Bare(nn.Module):
        def forward(self, x):
            return x

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.leaf = Leaf()
            self.sub = NoInit()
            self.bare = Bare()
    """)


def test_each_student_module_is_placed_at_the_line_that_built_it(tmp_path):
    p = tmp_path / "student.py"
    p.write_text(FILE)
    src = read_source(str(p), p.read_bytes())
    module = load(src)
    ctx = Context(module, src, "reversal")
    real = torch.nn.Module.__init__
    with ctx.construction_sites():
        m = module.Model()
    assert torch.nn.Module.__init__ is real                 # put back
    assert ctx.built_at(m.leaf) == 22                       # self.leaf = Leaf()
    assert ctx.built_at(m.sub) == 23                        # an inherited __init__ of the student's
    assert ctx.built_at(m.bare) is None                     # no __init__ in the file: no site (as before)
    assert ctx.built_at(m.leaf.lin) is None                 # torch's own class
    assert ctx.built_at(m) is None                          # built by the harness, not a line of the file
