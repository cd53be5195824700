"""Which students see which Gradescope test, and when: the rubric's [visibility] table (torch-free).

    [visibility]
    default = "visible"        # every test the keys below do not set (else `--visibility`, else "visible")
    overall = "visible"        # the tests that stand for the whole grade: "No bug found by the checks", a check
                               # that could not finish, a grader fault
    checks = "hidden"          # the 0-point `check: <id>` tests, and a [checks] deduction's test
    [visibility.causes]        # a diagnosed cause's test, by cause id
    softmax-wrong-dim = "after_due_date"
    [visibility.components]    # assignment lm: a component's test, by component (mha_rope or mha-rope)
    rope = "hidden"

The values are Gradescope's: visible, hidden, after_due_date, after_published. A key names its tests; an unset
one falls back to `--visibility` when given, else `default`, else visible (`fallback`). gradescope.py and
rubric_lm.gradescope_tests ask `of(table, kind, id, fallback)` for every test they write.
"""
from __future__ import annotations

import difflib

from ..lm_table import ADAPTER


def _component(name: str) -> str | None:
    """mha_rope or mha-rope -> mha-rope (rubric_lm.canonical's rule); None for what is not a component."""
    name = str(name).replace("_", "-")
    return name if name in ADAPTER else None

VALUES = ("visible", "hidden", "after_due_date", "after_published")     # Gradescope's (gradescope_schema.py)
GROUPS = ("default", "overall", "checks")
TABLES = ("causes", "components")
KINDS = {"cause": "causes", "component": "components", "check": "checks", "overall": "overall"}


class VisibilityError(ValueError):
    """The [visibility] table cannot be used; the message says why and where."""


def _value(v, where: str) -> str:
    if v not in VALUES:
        raise VisibilityError(f"{where} must be one of {', '.join(VALUES)}, not {v!r}")
    return v


def _unknown(key: str, known, where: str) -> VisibilityError:
    close = difflib.get_close_matches(key, sorted(known), n=3, cutoff=0.6)
    return VisibilityError(f"{where}: unknown {key!r}." + (f" Did you mean: {', '.join(close)}?" if close else ""))


def parse(table, source: str, cause_ids) -> dict:
    """The validated table: {default?, overall?, checks?, causes: {id: v}, components: {component: v}}."""
    where = f"{source} [visibility]"
    if not isinstance(table, dict):
        raise VisibilityError(f"{where} must be a table")
    out: dict = {"causes": {}, "components": {}}
    for key, v in table.items():
        if key in GROUPS:
            out[key] = _value(v, f"{where} {key}")
        elif key in TABLES:
            if not isinstance(v, dict):
                raise VisibilityError(f"{where} {key} must be a table ([visibility.{key}]) of id = visibility")
            out[key] = _entries(key, v, f"{source} [visibility.{key}]", cause_ids)
        else:
            raise _unknown(key, GROUPS + TABLES, where)
    return out


def _entries(kind: str, raw: dict, where: str, cause_ids) -> dict:
    out = {}
    for key, v in raw.items():
        if kind == "causes":
            if key not in cause_ids:
                raise _unknown(key, cause_ids, f"{where} cause id")
            name = key
        else:
            comp = _component(key)
            if comp is None:
                raise _unknown(key, ADAPTER, f"{where} component")
            name = comp
        out[name] = _value(v, f"{where} {key}")
    return out


def fallback(flag: str, table: dict | None) -> str:
    """The visibility of a test no key sets: `--visibility` when given, else the table's default, else visible."""
    return flag or (table or {}).get("default") or "visible"


def of(table: dict | None, kind: str, key: str, fallback_value: str) -> str:
    """A test's visibility: kind is cause (key: its id), component (key: the component), check or overall."""
    if not table:
        return fallback_value
    group = KINDS.get(kind)
    if group in TABLES:
        name = (_component(key) or key) if group == "components" else key
        return table.get(group, {}).get(name) or fallback_value
    return table.get(group or "", "") or fallback_value
