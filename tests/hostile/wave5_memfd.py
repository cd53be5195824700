# hostile: holds its memory as files the address-space limit does not count: 36 memfds of 60 MB (2.1 GB, over a
# 2 GB limit), written, never mapped, kept open in a list while the checks run (then waits 60 s); the parent's
# measurement from outside (or the run's cgroup) must end it and say it was memory
# base: reference
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave5.py appends it to its base)
import os as _os
import time as _time

_HELD = []


class MiniTransformer(MiniTransformer):
    def forward(self, src, tgt):
        if not _HELD:
            chunk = b"\1" * (4 << 20)
            for i in range(36):
                fd = _os.memfd_create(f"held-{i}")                                # OP memfd forward
                for _ in range(15):
                    _os.write(fd, chunk)
                _HELD.append(fd)
            print(f"HELD {len(_HELD)} memfds", flush=True)
            _time.sleep(60)
        return super().forward(src, tgt)
