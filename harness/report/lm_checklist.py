"""The `lm` report's component checklist, in the assignment's build order (terminal and HTML share it)."""
from __future__ import annotations

from ..assignments import assignment_of, folder_pack_of
from ..readable import cut
from ..lm_table import ADAPTER, COMPONENTS
from .sanitize import clean
from .text import as_dict

MARK = {"pass": "✓", "fail": "✗", "error": "✗", "not implemented": "–", "not defined": "–", "not run": "·"}


STATE = {"pass": "pass", "fail": "fail", "not-implemented": "not implemented", "absent": "not defined",
         "not-checked": "not run"}       # a pack's component statuses (packs/components.py) as the checklist says them


def rows(result: dict) -> list[dict]:
    """[{component, adapter, state, note, diagnosis}] for every component, in build order (a pack's: its
    bindings in the pack's order, the adapter being the binding's target)."""
    pack = folder_pack_of(result.get("assignment"))
    if pack is not None:
        from ..packs.components import rows as pack_rows
        return [{"component": comp, "adapter": r["target"], "state": STATE[r["status"]], "note": r["note"],
                 "diagnosis": r["cause"], "detail": r["note"]} for comp, r in pack_rows(result, pack).items()]
    checks = {c.get("id"): c for c in result.get("checks") or [] if isinstance(c, dict)}
    diag: dict[str, str | None] = {}
    for d in result.get("diagnoses") or []:
        if isinstance(d, dict) and d.get("component"):
            diag.setdefault(d["component"], d.get("id"))
    out = []
    for comp, adapter, _ in COMPONENTS:
        c = checks.get(f"lm-{comp}")
        data = (c or {}).get("data") or {}
        if c is None:
            state, note = "not run", ""
        elif c["status"] == "skip":
            state = "not implemented" if data.get("kind") == "not-implemented" else \
                "not defined" if data.get("kind") == "absent" else "not run"
            note = cut(c.get("detail", ""), 120)
        elif c["status"] == "pass":
            m = as_dict(c.get("measured"))
            state, note = "pass", (f"max rel error {m['max_rel']:.1e}" if isinstance(m.get("max_rel"), (int, float))
                                   else "")
        else:
            m = as_dict(c.get("measured"))
            state = "fail" if c["status"] == "fail" else "error"
            note = (f"max rel error {m['max_rel']:.2g}" if isinstance(m.get("max_rel"), (int, float))
                    else cut(c.get("detail", ""), 120))
        out.append({"component": comp, "adapter": ADAPTER[comp], "state": state, "note": note,
                    "diagnosis": diag.get(comp), "detail": (c or {}).get("detail", "")})
    return out


def terminal_lines(result: dict, width: int, st) -> list[str]:
    """Wrapped `✓ linear  ✗ rope (max rel error 0.41)  – adamw (not implemented)` lines."""
    items = []                                   # (plain text for the width, styled text)
    for r in rows(result):
        plain = f"{MARK[r['state']]} {r['component']}"
        if r["state"] in ("fail", "error"):
            note = clean(r["note"]) if r["note"] else ""           # may quote the student's exception
            extra = f" ({note})" if note and len(note) < 30 else ""
            items.append((plain + extra, st(plain, "red", True) + extra))
        elif r["state"] in ("not implemented", "not defined"):
            plain += f" ({r['state']})"
            items.append((plain, st(plain, dim=True)))
        else:
            items.append((plain, plain))
    indent = 13
    lines, cur, n = [], "  components ", indent
    for plain, styled in items:
        if n + len(plain) + 2 > width and n > indent:
            lines.append(cur.rstrip())
            cur, n = " " * indent, indent
        cur += styled + "  "
        n += len(plain) + 2
    lines.append(cur.rstrip())
    imports = next((c for c in result.get("checks") or [] if isinstance(c, dict) and c.get("id") == "lm-imports"), None)
    failed = ((imports or {}).get("data") or {}).get("import_failures") or []
    mods = sorted({cut(clean(n.get("missing_module") or n.get("error", "?")), 60) for n in failed if isinstance(n, dict)})
    if mods:    # not an error by itself: only a component that uses the name fails (and then says so)
        text = f"  imports    not available: {', '.join(mods[:5])} (only code that uses them would fail)"
        lines.append(st(cut(text, width), dim=True))
    return lines


def html_rows(result: dict, trunc) -> list[dict]:
    """The `lm` checklist rows for the HTML report (build order, a badge class per state); [] otherwise."""
    if not assignment_of(result.get("assignment")).per_component:
        return []
    badge = {"pass": "s-pass", "fail": "s-fail", "error": "s-error"}
    return [dict(r, mark=MARK[r["state"]], badge=badge.get(r["state"], "s-skip"),
                 note=trunc(r["note"], 300), detail=trunc(r["detail"], 600)) for r in rows(result)]
