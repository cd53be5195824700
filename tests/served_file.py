"""A one-file pack's submission in a real model server, with this process as its prober (issue 45): the shared part
of tests/integration/test_block_split.py and test_reversal_split.py. While the probes run, a profile hook on every
thread records any frame of the submission's files; at the end nothing may have run or been imported here."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

from harness.child import file_remote
from harness.isolation import sandbox, split
from harness.protocol import Limits


@contextlib.contextmanager
def served(tmp_path: Path, text: str, pack):
    """Yields (source, module) of `text` loaded in a model server for `pack`; asserts, after the block, that the
    prober ran no frame of it and imported no module of it."""
    work = tmp_path / "run"
    work.mkdir()
    (work / "submission.py").write_text(text)
    mine, theirs = socket.socketpair()
    proc = split.start_server(work, theirs, Limits(), sandbox.mode("auto"), "cpu", "test-token", None,
                              subprocess.DEVNULL, subprocess.DEVNULL)
    theirs.close()
    seen: set = set()
    roots = (str(work / "server"), str(work / "submission.py"), os.path.realpath(work))

    def profile(frame, event, arg):
        if frame.f_code.co_filename.startswith(roots):
            seen.add(frame.f_code.co_filename)
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        yield file_remote.load(str(work / "submission.py"), "submission.py", pack, 30, mine.fileno())
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        mine.close()
        proc.wait(timeout=30)
    here = [n for n, m in list(sys.modules.items()) if str(getattr(m, "__file__", "") or "").startswith(roots)]
    assert seen == set(), f"the prober ran the submission's code: {sorted(seen)}"
    assert here == [], f"the prober imported the submission: {here}"
