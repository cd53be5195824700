"""The model server's warm worker (harness/child/modelzygote.py, issue 45 item 6) and what both warm workers share
(harness/isolation/forkcare.py): the scripts copied into the server's sandbox import nothing of the grader, the
values the standalone worker writes down are the protocol's, and a fork's descriptors land where they should
even when one arrives at another's target number."""
from __future__ import annotations

import ast
import os
import sys

from harness import protocol
from harness.child import modelzygote
from harness.isolation import forkcare, sandbox, warm_split

NAMES = {f.stem for f in warm_split.SCRIPTS}


def test_the_server_scripts_import_only_the_standard_library_torch_and_each_other():
    assert {f.name for f in warm_split.SCRIPTS} >= {"modelzygote.py", "modelserver.py", "modelwire.py",
                                                   "modelrecord.py", "forkcare.py", "confine.py"}
    for f in warm_split.SCRIPTS:
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.module in NAMES, f"{f.name}: from .{node.module} (only a sibling script, as a fallback)"
                continue
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top in NAMES or top in ("torch", "numpy", "__future__"), \
                    f"{f.name} imports {name}"


def test_the_standalone_worker_writes_the_protocols_values():
    assert modelzygote.CTL == protocol.CTL
    assert modelzygote.SOCKET_FD == protocol.SERVER_FD
    assert modelzygote.SCRATCH_MB == sandbox.SCRATCH_MB
    assert protocol.SERVER_FD not in protocol.FORK_FDS


def test_place_moves_each_descriptor_to_its_target_even_onto_anothers_number():
    pipes = [os.pipe() for _ in range(3)]
    targets = (60, 61, 62)
    second = os.dup2(pipes[1][1], 60)          # the second arrives at the first's target number
    os.close(pipes[1][1])
    try:
        forkcare.place([pipes[0][1], second, pipes[2][1]], targets)
        for (r, _), fd in zip(pipes, targets):
            os.write(fd, b"x%d" % fd)
            assert os.read(r, 10) == b"x%d" % fd
        assert all(not _open(fd) for fd in (pipes[0][1], pipes[2][1]))     # the received numbers closed
    finally:
        for fd in targets + tuple(r for r, _ in pipes):
            if _open(fd):
                os.close(fd)


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
