"""watch re-checks a saved file in a warm worker (a sandboxed child); the loop's logic in-process: tests/unit/test_watch.py."""
from __future__ import annotations

import json
import threading
import time
from click.testing import CliRunner
import mutants
from harness.isolation import warm
from harness.cli.main import main

from test_watch import LESSON_PY  # noqa: F401 (fixtures, helpers)


def test_watch_rechecks_a_saved_file_in_a_warm_worker(tmp_path):
    """Two checks through the CLI: the lesson (clean), then the file saved with the softmax bug (named)."""
    f = tmp_path / "model.py"
    f.write_text(LESSON_PY.read_text())
    out = tmp_path / "r.json"
    first = {}

    def edit():            # the student saves a change once the first report is there
        deadline = time.monotonic() + 600
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        first.update(json.loads(out.read_text()))
        f.write_text(mutants.source(mutants.get("reversal-softmax-wrong-dim")))
    t = threading.Thread(target=edit, daemon=True)
    t.start()
    res = CliRunner().invoke(main, ["watch", str(f), "--json", str(out), "--html", str(tmp_path / "r.html"),
                                    "--interval", "0.2", "--max-runs", "2"])
    t.join(timeout=5)
    second = json.loads(out.read_text())
    assert first["verdict"] == "clean", first.get("diagnoses")
    assert second["verdict"] == "problems" and second["diagnoses"][0]["id"] == "softmax-wrong-dim"
    assert res.exit_code == 1, res.output
    assert "check 2" in res.output and res.output.count("watching") == 2
    assert "Traceback" not in res.output
    assert not warm._all               # the workers went with the command
