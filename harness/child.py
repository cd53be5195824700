"""The child process: load the student's file, run the probes, send plain data home.

Untrusted code runs only here. What goes back to the parent is JSON on a
private pipe (a file descriptor the parent passed, not stdout): a student's
print() cannot reach it. The parent validates everything it receives.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
import traceback


class BoundedIO(io.TextIOBase):
    """sys.stdout/stderr for student code: keeps the first `limit` characters, counts the rest."""

    def __init__(self, limit=200_000):
        self.parts, self.size, self.limit, self.dropped = [], 0, limit, 0

    def write(self, s):
        s = str(s)
        room = self.limit - self.size
        if room > 0:
            self.parts.append(s[:room])
            self.size += min(len(s), room)
        self.dropped += max(0, len(s) - max(room, 0))
        return len(s)

    def getvalue(self):
        tail = f"\n[... {self.dropped:,} more characters not kept]" if self.dropped else ""
        return "".join(self.parts) + tail


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--submission", required=True)
    ap.add_argument("--display-name", default=None)
    ap.add_argument("--assignment", default="auto")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--result-fd", type=int, required=True)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args(argv)

    channel = os.fdopen(a.result_fd, "w", buffering=1)
    import faulthandler
    import signal
    # The parent sends SIGUSR1 before killing a child that ran too long: the stack names the stuck line.
    faulthandler.register(signal.SIGUSR1, file=open("stack.txt", "w"), all_threads=False)

    def send(obj):
        channel.write(json.dumps(obj, default=_jsonable) + "\n")
        channel.flush()

    import torch  # before student code: the probes hold references taken now
    # One thread unless asked: these models are small, and a shared machine punishes oversubscription 10x.
    torch.set_num_threads(a.threads or 1)
    slowdown = _calibrate()
    from . import loader
    from .probes import PROBES
    from .probes.base import Context, ProbeTimeout, Skip, StudentError, check

    captured = BoundedIO()
    real_out, real_err = sys.stdout, sys.stderr
    t0 = time.perf_counter()
    result = {"checks": [], "skipped_code": [], "artifacts": {}, "timings": {}, "load": {"ok": False}}
    send({"event": "phase", "name": "load"})
    with open(a.submission, "rb") as f:
        raw = f.read()
    sys.stdout = sys.stderr = captured
    try:
        source = loader.read_source(a.display_name or a.submission, raw)
        source.run_path = a.submission  # frames name the copy that runs; locations show the user's name
        module = loader.load(source)
    except loader.SubmissionError as e:
        sys.stdout, sys.stderr = real_out, real_err
        src = locals().get("source")
        result["load"] = {"ok": False, "kind": e.kind, "message": e.message, "line": e.line, "detail": e.detail,
                          "location": src.where(e.line) if (src and e.line) else None}
        result["skipped_code"] = src.skipped if src else []
        result["stdout"] = captured.getvalue()
        result["timings"]["total_s"] = time.perf_counter() - t0
        send({"event": "result", "result": result})
        return 0
    finally:
        sys.stdout, sys.stderr = real_out, real_err
    result["load"] = {"ok": True}
    result["skipped_code"] = source.skipped
    result["timings"]["load_s"] = time.perf_counter() - t0
    assignment = a.assignment
    if assignment == "auto":
        assignment = "block" if hasattr(module, "TransformerBlock") and not hasattr(module, "MiniTransformer") \
            else "reversal"
    result["assignment"] = assignment
    ctx = Context(module, source, assignment, a.seed, a.device, a.quick, slowdown=slowdown)
    result["timings"]["slowdown"] = round(slowdown, 2)
    contract_ok = True
    for probe in PROBES:
        if assignment not in probe.assignments or (a.quick and probe.cost == "train"):
            continue
        send({"event": "phase", "name": probe.id})
        t = time.perf_counter()
        sys.stdout = sys.stderr = captured
        try:
            if not contract_ok:
                raise Skip("the required names are missing")
            checks = probe.fn(ctx)
        except Skip as e:
            checks = [check(probe.id, "skip", None, "", str(e))]
        except StudentError as e:
            checks = [check(probe.id, "error", {"exception": type(e.exc).__name__, "message": str(e.exc)[:500]},
                            "runs without raising", f"{e.where} raised {type(e.exc).__name__}: {str(e.exc)[:300]}",
                            data={"exception": type(e.exc).__name__, "message": str(e.exc)[:1000],
                                  "where": e.where, "timeout": isinstance(e.exc, ProbeTimeout)},
                            location=source.where(e.line) if e.line else None)]
        except Exception as e:  # a harness fault inside a probe: reported, never fatal
            checks = [check(probe.id, "error", {"harness_error": f"{type(e).__name__}: {e}"}, "",
                            "internal error of the probe (not the student's fault): " +
                            traceback.format_exc(limit=3)[-600:], data={"harness_error": True})]
        finally:
            sys.stdout, sys.stderr = real_out, real_err
        if probe.id == "contract" and checks[0]["status"] == "fail":
            contract_ok = False
        result["checks"].extend(checks)
        result["timings"][probe.id] = round(time.perf_counter() - t, 3)
    result["artifacts"] = ctx.artifacts
    result["stdout"] = captured.getvalue()
    result["timings"]["total_s"] = time.perf_counter() - t0
    send({"event": "result", "result": result})
    return 0


NOMINAL_STEP_S = 0.012  # one forward+backward of the reference at batch 16, one thread, idle 2-core machine


def _calibrate() -> float:
    """How much slower than nominal this machine is right now (time budgets stretch by this)."""
    import torch
    from reference_model import reversal as ref
    state = torch.random.get_rng_state()
    torch.manual_seed(0)
    m = ref.MiniTransformer()
    src, tgt = ref.make_batch(16)
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        logits, _ = m(src, tgt[:, :-1])
        logits.sum().backward()
        best = min(best, time.perf_counter() - t)
    torch.random.set_rng_state(state)
    return max(1.0, best / NOMINAL_STEP_S)


def _jsonable(o):
    try:
        import torch
        if isinstance(o, torch.Tensor):
            return o.tolist() if o.numel() < 10000 else f"<tensor {list(o.shape)}>"
    except Exception:
        pass
    if isinstance(o, float):
        return None
    return repr(o)[:200]


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # skip interpreter teardown: a student's atexit or __del__ must not run after the result
