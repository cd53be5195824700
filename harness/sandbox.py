"""How the child command is wrapped: bubblewrap when available (read-only system,
only the submission's folder visible and writable, no network), plain otherwise."""
from __future__ import annotations

import shutil
from pathlib import Path


def available() -> bool:
    return shutil.which("bwrap") is not None


def command(cmd: list[str], *, work: Path, isolate: str = "auto", pass_fd: int | None = None) -> list[str]:
    if isolate == "none" or (isolate == "auto" and not available()):
        return cmd
    return cmd  # bubblewrap wrapping arrives with the hostile-submissions work
