"""Text made safe for a terminal (issue 26): shared by the summary, the lm checklist and the CLI."""
from __future__ import annotations

_CONTROL: dict[int, str | None] = {c: None for c in list(range(0, 32)) + [127] + list(range(0x80, 0xA0))}
_CONTROL.update({ord("\t"): " ", ord("\n"): " ", ord("\r"): " "})
_CONTROL.update({c: None for c in (0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A))})


def clean(text) -> str:
    """Text that cannot drive the terminal: C0/C1 control characters (escape sequences, carriage returns,
    backspaces) and bidirectional overrides dropped, tabs and line breaks made spaces. Everything printed that
    came from a submission or a result passes through here (issue 26: a student's line could repaint the
    screen)."""
    return str(text).translate(_CONTROL)


def clean_block(text) -> str:
    """As `clean`, keeping line breaks (captured stdout echoed as it was printed)."""
    return "\n".join(clean(line) for line in str(text).splitlines())
