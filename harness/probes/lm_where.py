"""Where an `lm` interface problem is in the student's code (the component's check `location`).

The line that raised is rarely the line to change: a state dict that does not fit raises inside
load_state_dict, a constructor given the wrong arguments raises deep in the class. So:
- keys the module has but the adapter does not pass ("Missing key(s) in state_dict: "out_proj.weight""):
  the line of the student's package that defines that attribute (`self.out_proj = ...`,
  register_parameter/register_buffer). That is where the name or the extra parameter comes from.
- a KeyError of the student's own lookup (weights["output_proj.weight"]): the line that raised.
- any other interface problem (a size mismatch, a wrong argument, a dtype the contract does not have):
  the adapter's own line that handed the values over (the outermost frame of the student's files).
"""
from __future__ import annotations

import re


def _frames(tb, files: dict) -> list[dict]:
    out = []
    while tb is not None:
        shown = files.get(tb.tb_frame.f_code.co_filename)
        if shown:
            out.append({"file": shown, "line": tb.tb_lineno})
        tb = tb.tb_next
    return out


def _missing_attributes(message: str) -> list[str]:
    """'Missing key(s) in state_dict: "a.b.weight", "bias".' -> ['b', 'bias'] (the attribute each key names)."""
    m = re.search(r"Missing key\(s\) in state_dict:(.*?)(?:Unexpected key|size mismatch|\n|$)", message, re.S)
    keys = re.findall(r'"([^"]+)"', m.group(1)) if m else []
    out = []
    for k in keys:
        parts = k.split(".")
        attr = parts[-2] if len(parts) > 1 and parts[-1] in ("weight", "bias") else parts[-1]
        if attr not in out and not attr.isdigit():
            out.append(attr)
    return out


def _definition(attr: str, files: dict) -> dict | None:
    """The first line of the student's files that defines `attr` on self; package files before adapters."""
    pat = re.compile(rf"^\s*self\.{re.escape(attr)}\s*(?::[^=]+)?=(?!=)|"
                     rf"register_(?:parameter|buffer)\(\s*['\"]{re.escape(attr)}['\"]")
    order = sorted(files.items(), key=lambda kv: kv[1].replace("\\", "/").endswith("tests/adapters.py"))
    for path, shown in order:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                for i, line in enumerate(f, 1):
                    if pat.search(line):
                        return {"file": shown, "line": i}
        except OSError:
            continue
    return None


def interface_location(exc: BaseException, files: dict) -> dict | None:
    """The line to change for an interface exception, or None (then the raising line stands)."""
    frames = _frames(exc.__traceback__, files)
    for attr in _missing_attributes(str(exc)):
        found = _definition(attr, files)
        if found:
            return found
    if isinstance(exc, KeyError):     # the student's own lookup of a key the adapter does not pass: that line
        return None
    return frames[0] if frames else None
