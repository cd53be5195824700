"""A lazily imported pyplot through a real check (a sandboxed child); the rewriting in-process: tests/unit/test_lazy_import.py."""
from __future__ import annotations

import textwrap
from harness.child import lazy_import

from test_lazy_import import FILE, _fresh  # noqa: F401, F811 (fixtures, helpers)


def test_pyplot_is_imported_only_when_a_function_uses_it(tmp_path):
    p = tmp_path / "student.py"
    p.write_text(FILE)
    got = _fresh(textwrap.dedent(f"""\
        import json, sys
        from harness.child.loader import load, read_source
        src = read_source({str(p)!r}, open({str(p)!r}, "rb").read())
        m = load(src)
        before = "matplotlib.pyplot" in sys.modules
        name = m.plot_name()
        print(json.dumps({{"before": before, "after": "matplotlib.pyplot" in sys.modules, "name": list(name),
                          "colour": m.colour(), "factory_left": "{lazy_import.FACTORY}" in vars(m)}}))
        """))
    assert got["before"] is False                       # loading did not import it
    assert got["after"] is True                         # the first use did
    assert got["name"] == ["matplotlib.pyplot", "matplotlib.pyplot"]
    assert got["colour"][0] == "matplotlib.cm" and got["colour"][1]   # a real attribute of the module
    assert got["factory_left"] is False                 # the loader's helper is not left in the module
