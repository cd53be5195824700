"""`mtxdiag assignment list|new`: the installed packs, and a skeleton for a new one (docs/packs.md)."""
from __future__ import annotations

import re
from pathlib import Path

import click

from ..packs.discover import NAME

PYPROJECT = '''[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "mtxdiag-pack-{name}"
version = "0.1.0"
description = "The {name} assignment for mtxdiag, as a pack"
requires-python = ">=3.10"
# mtxdiag itself is not a dependency: the pack is installed beside it (pip install -e . in its environment)
dependencies = []

# how mtxdiag finds the pack: `mtxdiag assignment list` shows it once this is installed
[project.entry-points."mtxdiag.packs"]
{name} = "{module}.pack:PACK"

[tool.setuptools]
packages = ["{module}"]
'''

PACK = '''"""The {name} assignment as an mtxdiag pack (docs/packs.md in mtxdiag explains every field)."""
from harness.packs.api import Assignment, Binding, Edition, Mask, Pack

ASSIGNMENT = Assignment(
    name="{name}",
    title="One line: what the student builds.",
    handed_in="the assignment folder holding {module_file}",
    required=("MultiHeadAttention",),       # the contract: the names a submission must define
    packages=("numpy",),                   # third-party imports the student's code may use besides torch
    per_component=True,                    # graded and reported per binding (Binding.points)
)

PACK = Pack(
    assignment=ASSIGNMENT,
    # the paths (relative to the submission folder) that recognise it: the first must be there
    files=("{module_file}",),
    # the editions, most specific first; an edition without markers is the fallback
    editions=(Edition("{edition}", markers={{}}, student=("MultiHeadAttention",)),),
    # the team-written reference (never the course's code): the same names and signatures
    reference="{module}.reference",
    bindings=(
        # attention: rows are distributions, the mask blocks what its convention says, causality, heads, dropout
        Binding(role="attention", component="MultiHeadAttention",
                target="{student_module}:MultiHeadAttention",
                init={{"embed_dim": 8, "num_heads": 2}}, call=("query", "key", "value", "mask"),
                shapes={{"N": 2, "S": 5, "T": 5, "E": 8, "H": 2}},
                mask=Mask(blocks="zero", dtype="any", shape="TxS"), points=10.0),
        # positional: the table against the declared formula, added to the input, not in place
        # Binding(role="positional", component="PositionalEncoding", target="{student_module}:PositionalEncoding",
        #         init={{"embed_dim": 8, "max_len": 50}}, call=("x",), shapes={{"N": 2, "S": 5, "D": 8}},
        #         formula="sin-even-cos-odd", points=5.0),
        # layer: one encoder/decoder layer (its residuals, its mask passed on)
        # Binding(role="layer", component="DecoderLayer", target="{student_module}:DecoderLayer", points=5.0),
        # model: the full model's forward and loss (first-step loss, causal leakage, gradient flow)
        # Binding(role="model", component="Model", target="{student_module}:Model", points=10.0),
        # sampler: the model's sampling or decoding method (shape, stopping, determinism)
        # Binding(role="sampler", component="Model.sample", target="{student_module}:Model.sample", points=5.0),
        # training-step: one optimisation step (gradients zeroed, the step taken)
        # Binding(role="training-step", component="train_step", target="{student_module}:train_step", points=5.0),
    ),
)
'''

REFERENCE = '''"""The team's reference for the {name} pack: the course's names and signatures, written from the maths (never
the course's code). The generic probes compare the student's pieces with these, built from the same seed."""
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        raise NotImplementedError("write the reference attention here")

    def forward(self, query, key, value, attn_mask=None):
        raise NotImplementedError


__all__ = ["MultiHeadAttention", "torch"]
'''

README = '''# mtxdiag pack: {name}

The {name} assignment for mtxdiag. Install it beside mtxdiag (`pip install -e .` in mtxdiag's environment); then
`mtxdiag assignment list` shows it and `mtxdiag check ASSIGNMENT_FOLDER` recognises a folder holding
`{module_file}`.

- `{module}/pack.py`: the declaration (what a submission is, its editions, the bindings of its pieces to
  mtxdiag's probe roles, their points).
- `{module}/reference.py`: the team's reference implementation, with the course's signatures.
'''


@click.group("assignment")
def assignment():
    """The assignments mtxdiag knows: the built-in ones and the installed packs."""


@assignment.command("list")
def list_packs():
    """The assignments and the packs found (name, distribution, editions), and any pack that cannot be used."""
    from ..assignments import ALL, BROKEN, FOUND
    by_name = {f.name: f for f in FOUND if f.pack is not None}
    for a in ALL:
        f = by_name.get(a.name)
        if f is None:
            click.echo(f"{a.name:12} built in      {a.title}")
            continue
        assert f.pack is not None
        editions = ", ".join(e.name for e in f.pack.editions) or "one edition"
        click.echo(f"{a.name:12} pack of {f.distribution} ({f.value}); editions: {editions}; {a.title}")
    for problem in BROKEN:
        click.echo(f"broken: {problem}")


@assignment.command("new")
@click.argument("name")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="Where the pack's folder (mtxdiag-pack-NAME) is written.")
def new(name, directory):
    """Write a skeleton pack NAME: pyproject (its entry point), pack.py (one binding per role), a reference stub,
    a README. `pip install -e` it beside mtxdiag."""
    if not NAME.match(name):
        raise click.UsageError(f"{name!r}: a pack's name is lower-case letters, digits, '-' or '_' (at most 40), "
                               "starting with a letter")
    from ..assignments import BY_NAME
    if name in BY_NAME:
        raise click.UsageError(f"{name!r} is already an assignment (mtxdiag assignment list)")
    module = re.sub(r"\W", "_", name) + "_pack"
    fields = {"name": name, "module": module, "student_module": f"{module.removesuffix('_pack')}.layers",
              "module_file": f"{module.removesuffix('_pack')}/layers.py", "edition": "2026"}
    out = Path(directory) / f"mtxdiag-pack-{name}"
    if out.exists():
        raise click.UsageError(f"{out} exists: not overwritten")
    (out / module).mkdir(parents=True)
    (out / "pyproject.toml").write_text(PYPROJECT.format(**fields))
    (out / "README.md").write_text(README.format(**fields))
    (out / module / "__init__.py").write_text(f'"""The {name} pack for mtxdiag."""\n')
    (out / module / "pack.py").write_text(PACK.format(**fields))
    (out / module / "reference.py").write_text(REFERENCE.format(**fields))
    click.echo(f"wrote {out}: edit {module}/pack.py and {module}/reference.py, then `pip install -e {out}`")
