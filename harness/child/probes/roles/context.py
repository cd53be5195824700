"""What a role probe is given and what it is: the interface the pack machinery calls (harness/packs/api.py).

`student` and `reference` are the object the binding's target names, resolved in the submission and in the pack's
reference module: a class (attention, positional, layer, model) or a function/method (sampler). `source` maps the
submission's paths to their text, for the student's lines."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class RoleProbe:
    id: str
    fn: Callable          # fn(rctx) -> list[check dict]; each check's id is f"{binding.component}.{id}"
    cost: str             # "static" | "quick" | "train"


@dataclass
class RoleContext:
    binding: Any
    student: Any
    reference: Any
    seed: int = 0
    device: str = "cpu"
    quick: bool = False
    source: dict[str, str] = field(default_factory=dict)
