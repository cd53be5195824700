"""A one-file or repository pack's own probe (harness/packs/api.py Pack.probes): what its plan lists, in order.
Child side."""
from __future__ import annotations

from typing import Callable, NamedTuple


class Own(NamedTuple):
    """One of a pack's own probes: id, fn(ctx) -> [check], cost; `side` (trains: may run in the second process
    beside the others, child/side.py) and `either` (reads nothing another probe leaves in ctx.cache, so either
    process may run it on a repair's re-check)."""
    id: str
    fn: Callable
    cost: str                   # "static" | "quick" | "train"
    side: bool = False
    either: bool = False
