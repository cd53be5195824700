"""mtxdiag's command line: a thin click layer over harness.api."""
from __future__ import annotations

import importlib
import os
import sys
import threading
from dataclasses import replace
from pathlib import Path

import click

from .. import __version__
from ..assignments import BROKEN, CHOICES, FOLDER, for_folder
from ..api import check_file, exit_code, write_json_atomic
from ..limits import limit_options
from ..runner import Limits


class _LazyGroup(click.Group):
    """Subcommands in their own modules, imported only when named (or listed by --help): `check` does not
    pay ~0.1 s for importing the grader, the self-test and the mutant tools."""
    LAZY = {"mutants": ("harness.cli.mutants", "mutants_group"), "selftest": ("harness.selftest", "selftest"),
            "grade": ("harness.grading.cli", "grade"), "gradescope": ("harness.grading.cli", "gradescope"),
            "assignment": ("harness.cli.packs", "assignment")}

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | {n for n in self.LAZY if self.get_command(ctx, n)})

    def get_command(self, ctx, name):
        cmd = super().get_command(ctx, name)
        if cmd is None and name in self.LAZY:
            mod, attr = self.LAZY[name]
            try:
                cmd = getattr(importlib.import_module(mod), attr, None)
            except ImportError:
                return None
        return cmd


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mtxdiag")
def main():
    """Diagnose and grade students' PyTorch transformers."""
    # Where no sandbox's PID namespace hides this process, a run's code (the same user) could write its memory
    # through /proc/PID/mem: non-dumpable refuses that (docs/security.md; its children exec, which resets it).
    from ..isolation.confine import undumpable
    undumpable()


def _default_report(sub: Path, ext: str) -> Path:
    return Path("reports") / f"{sub.stem}.{ext}"


@main.command()
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--assignment", type=click.Choice(list(CHOICES)), default="auto",
              show_default=True, help="Which lesson the file implements (detected from its names by default; "
                                      "a folder is an `lm` repository or a pack's assignment folder).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the result as JSON here (default: reports/<name>.json); `-`: to stdout, and the "
                   "summary to stderr.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the HTML report here (default: reports/<name>.html).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--quick", is_flag=True, help="Skip the training probes.")
@limit_options()
@click.option("--no-daemon", is_flag=True,
              help="Start a new sandboxed process for this check instead of forking this user's warm check "
                   "daemon (also: MTXDIAG_DAEMON=0). The result is the same either way.")
@click.option("--repair", is_flag=True,
              help="Prove the diagnoses: apply each one's usual fix (or, for a failure outside the catalogue, a "
                   "small edit found by search) to a copy, re-check it in the sandbox, and show the edit that "
                   "repairs as a diff with the before/after numbers.")
@click.option("--fix", is_flag=True,
              help="As --repair, then write the file with the verified repairs beside it (NAME.fixed.py); the "
                   "file itself is never changed.")
def check(file, assignment, json_path, html_path, seed, device, quick, timeout, memory, load_timeout, no_daemon,
          repair, fix):
    """Load FILE (.py or .ipynb, a CS336 repository folder with tests/adapters.py, or a pack's assignment folder
    such as CS231n's, holding cs231n/), probe it and print the likely bugs.

    On the CPU the first check starts a per-user daemon that keeps a warm worker (torch imported once, in
    the sandbox) for 10 minutes after the last check; each check is a fresh fork of it. `mtxdiag daemon stop`
    ends it.

    Exit status: 0 clean, 1 problems found, 2 usage error.
    """
    assignment = _usable(file, assignment)
    limits = Limits(timeout_s=timeout, memory_mb=memory, load_timeout_s=load_timeout, cores=min(2, os.cpu_count() or 1))
    result = check_and_report(file, assignment=assignment, seed=seed, device=device, quick=quick, limits=limits,
                              json_path=json_path, html_path=html_path, daemon=not no_daemon,
                              repair="fix" if fix else repair)
    sys.exit(exit_code(result))


@main.command()
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--assignment", type=click.Choice(list(CHOICES)), default="auto",
              show_default=True, help="As for `check`.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write each result as JSON here (default: reports/<name>.json).")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write each HTML report here (default: reports/<name>.html).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--quick/--full", default=True, show_default=True,
              help="Skip the training probes (the default here: a re-check in seconds) or run them.")
@limit_options(what="one check")
@click.option("--interval", type=click.FloatRange(min=0.05, max=60.0), default=0.5, show_default=True,
              help="Seconds between two looks at the file.")
@click.option("--max-runs", type=click.IntRange(min=1), default=None, hidden=True,
              help="Stop after this many checks (tests, benchmarks).")
def watch(file, assignment, json_path, html_path, seed, quick, timeout, memory, load_timeout, interval, max_runs):
    """Check FILE now and again each time it is saved, until Ctrl-C.

    The first check starts a warm worker (torch imported once, in the sandbox); each later check is a fresh
    fork of it, with the same limits and result channel as any check. CPU only.

    Exit status: that of the last check (0 clean, 1 problems found); 2 usage error.
    """
    from ..isolation import warm
    from .watch import loop
    assignment = _usable(file, assignment)
    limits = Limits(timeout_s=timeout, memory_mb=memory, load_timeout_s=load_timeout,
                    cores=min(2, os.cpu_count() or 1), warm=True)
    shown: dict = {}        # the last summary printed: a Ctrl-C while its report is drawn exits with its status
    try:
        last = loop(file, lambda n: check_and_report(file, assignment=assignment, seed=seed, device="cpu",
                                                     quick=quick, limits=limits, json_path=json_path,
                                                     html_path=html_path, on_shown=lambda r: shown.update(last=r)),
                    interval=interval, max_runs=max_runs, say=click.echo)
    finally:
        warm.close_all()
    last = shown.get("last", last)
    sys.exit(exit_code(last) if last is not None else 0)


@main.group()
def daemon():
    """This user's check daemon: the warm worker that `check` forks (it exits by itself when idle)."""


@daemon.command("status")
def daemon_status():
    """Print each running daemon: its pid, checks served, idle workers."""
    from ..isolation import daemon as check_daemon
    found, mine = check_daemon.ask("status"), check_daemon.key()
    for d in found:
        whose = "this install's" if d.get("key") == mine else "another install's"
        click.echo(f"daemon {d['key']} ({whose}): pid {d.get('pid')}, up {_ago(d.get('since'))}, {d.get('checks', 0)} "
                   f"checks, {d.get('running', 0)} running, {d.get('idle_workers', 0)} idle worker(s), exits after "
                   f"{d.get('idle_exit_s', 0):.0f} s without a check")
    if not found:
        click.echo("no check daemon is running")


@daemon.command("stop")
@click.option("--all", "everyone", is_flag=True, help="Stop every daemon of this user (other installs' too).")
def daemon_stop(everyone):
    """Stop the daemon this install's `check` uses (a check running in it ends; the next check starts a new
    one). Other installs' daemons of this user keep running unless --all."""
    from ..isolation import daemon as check_daemon
    stopped = [d for d in check_daemon.ask("stop", everyone=everyone) if d.get("stopping")]
    if stopped:
        click.echo(f"stopped {len(stopped)} check daemon(s)")
        return
    others = [] if everyone else [d for d in check_daemon.ask("status") if d.get("key") != check_daemon.key()]
    if others:       # `daemon status` lists them: say why they were left running
        n = len(others)
        click.echo(f"no check daemon of this install is running; {n} other{'s' if n != 1 else ''} of yours "
                   f"{'are' if n != 1 else 'is'} (another install's or settings'): `mtxdiag daemon stop --all` "
                   f"ends {'them' if n != 1 else 'it'}")
    else:
        click.echo("no check daemon is running")


def _ago(since) -> str:
    import time
    s = max(0.0, time.time() - float(since or time.time()))
    return f"{s / 60:.0f} min" if s >= 60 else f"{s:.0f} s"


def _usable(file: Path, assignment: str) -> str:
    """The assignment to check FILE as; a usage error for what cannot be checked."""
    if not file.exists():
        raise click.UsageError(f"no such file: {file}")
    for problem in BROKEN:         # an installed pack that cannot be used: said, never in the way of a check
        click.echo(f"mtxdiag: {problem}", err=True)
    if file.is_dir():
        as_folder = for_folder(assignment, file)
        if as_folder is None:
            raise click.UsageError(f"{file} is a folder: only `{'`, `'.join(FOLDER)}` are checked from a folder "
                                   f"(a repository or a pack's assignment folder)")
        return as_folder
    if file.suffix not in (".py", ".ipynb"):
        raise click.UsageError(f"{file} is neither a .py file nor a .ipynb notebook")
    return assignment


def check_and_report(file: Path, *, assignment, seed, device, quick, limits, json_path=None, html_path=None,
                     footer=None, daemon=False, repair=False, on_shown=None) -> dict:
    """One check: progress on stderr, the JSON, the summary printed as soon as the diagnoses are known, then
    the HTML report (its figures take a second) and its path. `footer`: a line after the report's path;
    `on_shown(result)`: called once the summary is printed (what the user has seen, even if stopped now)."""
    from ..report import terminal
    progress = terminal.Progress(sys.stderr)
    warm = _prepare_html()
    not_repaired = not_repaired_why(file, device) if repair else None
    if not_repaired:
        repair = False          # nothing tried nor written: the reason is said below, after the summary
    if repair and device == "cpu":
        from ..isolation import daemon as check_daemon
        if not (daemon and check_daemon.running()):         # else the daemon makes them
            _prepare_repair(file)
    try:
        # with --repair the check records which functions each probe ran: a re-check skips the others
        first = replace(limits, coverage=True) if repair and device == "cpu" and file.suffix == ".py" else limits
        result = check_file(file, assignment=assignment, seed=seed, device=device, quick=quick, limits=first,
                            on_event=progress.phase, daemon=daemon, say=progress.note)
        if repair and device == "cpu":
            _repair(result, file, seed, quick, limits, daemon, progress)
    finally:
        progress.done()
    json_path = json_path or _default_report(file, "json")
    to_stdout = str(json_path) == "-"        # `--json -`: the JSON alone on stdout, for a pipe; the rest on stderr
    if to_stdout:
        import json
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
        sys.stdout.flush()
    else:
        write_json_atomic(result, json_path)
    text = terminal.summary(result, json_path=None if to_stdout else json_path,
                            color=terminal._color(sys.stderr) if to_stdout else None,
                            width=terminal.width_for(sys.stderr) if to_stdout else None)
    click.echo(text, err=to_stdout)
    if on_shown is not None:
        on_shown(result)
    if not_repaired:
        click.echo(f"  repair   {not_repaired}", err=to_stdout)
    elif repair:
        text = terminal.repairs(result)
        click.echo(text or "  repair   no located diagnosis has a repair to try", err=to_stdout)
        if repair == "fix":
            _write_fixed(result, file)
    html_path = html_path or _default_report(file, "html")
    warm.join()
    try:
        from ..report import html as html_report
        html_report.write(result, html_path, source_path=file)
        click.echo(terminal.report_line(html_path, color=terminal._color(sys.stderr) if to_stdout else None),
                   err=to_stdout)
    except ImportError:
        pass
    if footer:
        click.echo(footer, err=to_stdout)
    if daemon and device == "cpu":
        from ..isolation import daemon as check_daemon
        check_daemon.start()      # for the next check, unless one runs: it warms up while the student reads this
    return result


def not_repaired_why(file: Path, device: str) -> str | None:
    """Why --repair/--fix tries nothing for FILE, in a sentence for the student; None when it tries. Repairs
    edit one .py file's syntax tree and re-check it on the CPU."""
    if file.is_dir():
        return "a repository is not repaired: --repair and --fix edit a single .py file only"
    if file.suffix == ".ipynb":
        return ("notebooks are not repaired: --repair and --fix edit .py files only (export the notebook with "
                f"`jupyter nbconvert --to script {file.name}` and check the .py file to try them)")
    if device != "cpu":
        return "repairs run on the CPU only: check again without --device cuda to try them"
    return None


def _prepare_html() -> threading.Thread:
    """The HTML report's one-time costs (imports, the template), paid in a thread while the child runs: the parent
    only waits for the child then."""
    def work():
        from ..report import html as html_report
        html_report.prepare()
    return _in_background("mtxdiag-html-warm-up", work)    # on failure write() pays it, and reports a real problem


def _prepare_repair(file: Path) -> threading.Thread:
    """The repairs' one-time costs (LibCST's import, the file's parse: ~0.35 s), paid the same way."""
    def work():
        from ..repair import run
        run.prepare(file)
    return _in_background("mtxdiag-repair-warm-up", work)       # on failure repair_check pays it


def _in_background(name: str, work) -> threading.Thread:
    """`work` in a daemon thread; whatever it raises is dropped (it only pays a cost early)."""
    def guarded():
        try:
            work()
        except Exception:         # noqa: BLE001 - the later caller pays the cost and meets the real problem
            pass
    t = threading.Thread(target=guarded, name=name, daemon=True)
    t.start()
    return t


def _repair(result, file: Path, seed, quick, limits, daemon, progress):
    """Verified repairs of the result's diagnoses (harness/repair), through the same check path and limits: by
    the check daemon when one answers (its LibCST warm, its workers: this command imports neither), else here."""
    progress.phase("repairs")
    if daemon and result.get("checks") and result.get("diagnoses"):
        from ..isolation import daemon as check_daemon
        from ..protocol import CheckSpec
        spec = CheckSpec(str(file), assignment=result.get("assignment") or "auto", seed=seed, quick=quick,
                         limits=limits)
        if check_daemon.repair(result, spec, say=progress.note):
            return
    from ..repair.run import repair_check
    repair_check(result, file, seed=seed, limits=limits, daemon=daemon, say=progress.note)


def _write_fixed(result, file: Path):
    """check --fix: the verified repairs applied in turn to the file's text, written beside it."""
    from ..repair.run import fixed_path, patched_text
    verified = [d["repair"] for d in result.get("diagnoses", []) if (d.get("repair") or {}).get("verified")]
    if not verified or not file.is_file():
        click.echo("  fix      nothing written: no verified repair")
        return
    text, applied = file.read_text(encoding="utf-8"), 0
    for r in verified:
        new = patched_text(text, r)
        if new is not None:
            text, applied = new, applied + 1
    out = fixed_path(file)
    with open(out, "x", encoding="utf-8") as f:     # "x": never over an existing file
        f.write(text)
    click.echo(f"  fix      {out} ({applied} of {len(verified)} verified repairs applied; {file} unchanged)")
