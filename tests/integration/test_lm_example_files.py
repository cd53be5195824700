"""submissions/lm_example is what submissions/make_lm_example.py writes from the reference (issue 27 item 8)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_bundled_lm_example_is_up_to_date():
    r = subprocess.run([sys.executable, str(ROOT / "submissions" / "make_lm_example.py"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (ROOT / "submissions" / "lm_example" / "tests" / "adapters.py").is_file()
    assert "from cs336_basics.model import" in (ROOT / "submissions/lm_example/tests/adapters.py").read_text()
