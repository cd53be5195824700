"""`pytest --mtxdiag`: mtxdiag's diagnosis under each failing adapter test of the `lm` assignment.

A student runs their course's own tests in their repository (`pytest --mtxdiag`); under every
failing test whose name maps to a component (test_rope -> rope, test_transformer_lm -> lm, ...) the
report gets a section "mtxdiag diagnosis" with the component's status, the likely cause, its
confidence and the evidence, and the terminal summary lists the diagnosed components.

The diagnosis runs in process (harness.child.probes.lm.diag.diagnose_component on the adapter function the
test module imported: lmdiag measures, and harness/causes/lm_decide.py, the rules `mtxdiag check`
uses in its parent, decides). That is deliberate: this is the student's own machine running the student's
own tests, and pytest has already imported and executed their code in this process, so there is
no trust boundary for a subprocess to protect. Grading never takes this path: `mtxdiag check` and
`mtxdiag grade` run student code only in the sandboxed child. Without `--mtxdiag` the plugin does
nothing (it is registered through the `pytest11` entry point in every environment mtxdiag is
installed in) and imports no torch.
"""
from __future__ import annotations

import re
import sys

import pytest

# test name fragment -> component, most specific first (names of the course's tests and common variants)
TEST_COMPONENTS = (
    ("multihead_self_attention_with_rope", "mha_rope"), ("multihead_self_attention", "mha"),
    ("scaled_dot_product_attention", "sdpa"), ("sdpa", "sdpa"), ("rope", "rope"),
    ("transformer_block", "block"), ("transformer_lm", "lm"), ("swiglu", "swiglu"), ("silu", "silu"),
    ("rmsnorm", "rmsnorm"), ("softmax", "softmax"), ("cross_entropy", "cross_entropy"),
    ("gradient_clipping", "gradient_clipping"), ("adamw", "adamw"), ("cosine_schedule", "lr_schedule"),
    ("lr_schedule", "lr_schedule"), ("get_batch", "get_batch"), ("embedding", "embedding"), ("linear", "linear"),
)
SECTION = "mtxdiag diagnosis"
_CACHE = pytest.StashKey[dict]()   # component -> its diagnosis, once per session


def component_of(test_name: str) -> str | None:
    name = re.sub(r"\[.*\]$", "", test_name).lower()
    if not name.startswith("test"):
        return None
    for fragment, component in TEST_COMPONENTS:
        if fragment in name:
            return component
    return None


def pytest_addoption(parser):
    group = parser.getgroup("mtxdiag")
    group.addoption("--mtxdiag", action="store_true", default=False,
                    help="under each failing adapter test of the lm assignment, show mtxdiag's diagnosis "
                         "of that component")


def _adapter(item, component):
    from harness.child.probes.lm.diag.inputs import ADAPTER
    name = ADAPTER[component]
    fn = getattr(getattr(item, "module", None), name, None)
    if fn is not None:
        return fn
    for mod_name, mod in list(sys.modules.items()):     # the repository's tests/adapters.py
        if mod_name.split(".")[-1] == "adapters" and callable(getattr(mod, name, None)):
            return getattr(mod, name)
    return None


def render(result: dict) -> str:
    """The diagnosis as the text shown under the failing test."""
    comp, status = result["component"], result["status"]
    if status == "pass":
        return (f"mtxdiag: {comp} ({result['adapter']}) agrees with the reference on mtxdiag's inputs; the "
                "failure may come from the test's own setup or from a component it also calls.")
    if status == "not-implemented":
        return f"mtxdiag: {comp} is not implemented yet ({'; '.join(result['evidence'])})."
    head = (f"mtxdiag: {comp} fails - {result['cause']} (confidence {result['confidence']:.2f})"
            if result["cause"] else f"mtxdiag: {comp} fails - no known cause matches")
    if result.get("mutant_component") and result["mutant_component"] != comp:
        head += f"; the bug is in {result['mutant_component']}"
    lines = [head] + [f"  - {line}" for line in result["evidence"]]
    if result.get("where"):
        lines.append(f"  at  {result['where']}")
    if result.get("fix"):
        lines.append(f"  fix {result['fix']}")
    return "\n".join(lines)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not item.config.getoption("mtxdiag", False) or report.when != "call" or not report.failed:
        return
    component = component_of(getattr(item, "originalname", None) or item.name)
    if component is None:
        return
    cache = item.config.stash.setdefault(_CACHE, {})
    if component not in cache:
        from harness.child.probes.lm.diag.diagnose import diagnose_component
        fn = _adapter(item, component)
        try:
            cache[component] = diagnose_component(component, fn)
            if cache[component]["status"] == "fail":
                from harness.pytest_plugin.where import fix_for, locate
                cache[component].update(where=locate(component, fn, item.config.rootpath),
                                        fix=fix_for(cache[component].get("cause")))
        except Exception as e:                            # noqa: BLE001 - never break the student's test run
            cache[component] = {"component": component, "adapter": "", "status": "fail", "cause": None,
                                "confidence": 0.0, "evidence": [f"mtxdiag could not diagnose: {type(e).__name__}: {e}"]}
    from harness.report.terminal import clean_block        # evidence may quote the student's exception
    report.sections.append((SECTION, clean_block(render(cache[component]))))



def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not config.getoption("mtxdiag", False):
        return
    cache = config.stash.get(_CACHE, {})
    if not cache:
        return
    terminalreporter.section("mtxdiag")
    for component, result in cache.items():
        cause = result.get("cause") or ("-" if result["status"] != "fail" else "no known cause")
        where = f" at {result['where']}" if result.get("where") else ""
        terminalreporter.write_line(f"{component}: {result['status']}, {cause}{where}")
        if result.get("fix"):
            terminalreporter.write_line(f"  fix: {result['fix']}")
