# hostile: takes disk no walk of a folder finds: 6 files of 60 MB (each under the per-file cap) written into its
# run folder and unlinked while it holds them open (360 MB, over the run's 256 MB), and in a warm worker a copy
# beside its run folder, in the worker's own folder; then waits 60 s. The parent must end it and say it was disk
# base: reference
# flake8: noqa  (a fragment: tests/integration/test_hostile_wave5.py appends it to its base)
import os as _os
import time as _time

_HELD = []


class MiniTransformer(MiniTransformer):
    def forward(self, src, tgt):
        if not _HELD:
            chunk = b"\1" * (4 << 20)
            for i in range(6):
                f = open(f"hidden_{i}.bin", "wb")
                for _ in range(15):
                    f.write(chunk)
                f.flush()
                _os.unlink(f"hidden_{i}.bin")                                    # OP unlink forward
                _HELD.append(f)
            slot = _os.path.dirname(_os.getcwd())
            beside = _os.path.join(slot, "beside.bin")
            try:
                assert _os.path.basename(slot).startswith("mtxdiag-warm-")    # a warm worker's folder
                with open(beside, "wb") as f:
                    for _ in range(10):
                        f.write(chunk)
            except (OSError, AssertionError):
                pass
            print(f"HELD {len(_HELD)} unlinked files", flush=True)
            _time.sleep(60)
        return super().forward(src, tgt)
