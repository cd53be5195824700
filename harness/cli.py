"""mtxdiag's command line: a thin click layer over harness.api."""
from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import click

from . import __version__
from .api import check_file, exit_code, write_json_atomic
from .runner import Limits


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mtxdiag")
def main():
    """Diagnose and grade students' PyTorch transformers."""


def _default_report(sub: Path, ext: str) -> Path:
    return Path("reports") / f"{sub.stem}.{ext}"


@main.command()
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--assignment", type=click.Choice(["auto", "reversal", "block", "lm"]), default="auto",
              show_default=True, help="Which lesson the file implements (detected from its names by default; "
                                      "a folder is an `lm` repository).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the result as JSON here (default: reports/<name>.json).")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the HTML report here (default: reports/<name>.html).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--quick", is_flag=True, help="Skip the training probes (a few seconds instead of ~20).")
@click.option("--timeout", type=float, default=180.0, show_default=True, help="Wall-clock limit in seconds.")
@click.option("--memory", type=int, default=6144, show_default=True, help="Memory limit of the child in MB.")
@click.option("--load-timeout", type=click.FloatRange(min=1.0), default=30.0, show_default=True,
              help="Seconds loading the submission (definitions only) may take before it ends as `timeout`.")
def check(file, assignment, json_path, html_path, seed, device, quick, timeout, memory, load_timeout):
    """Load FILE (.py or .ipynb, or a CS336 repository folder with tests/adapters.py), probe it and print the
    likely bugs.

    Exit status: 0 clean, 1 problems found, 2 usage error.
    """
    if not file.exists():
        raise click.UsageError(f"no such file: {file}")
    if file.is_dir():
        if assignment not in ("auto", "lm"):
            raise click.UsageError(f"{file} is a folder: only the `lm` assignment is checked from a repository")
        assignment = "lm"
    elif file.suffix not in (".py", ".ipynb"):
        raise click.UsageError(f"{file} is neither a .py file nor a .ipynb notebook")
    from .report import terminal
    progress = terminal.Progress(sys.stderr)
    warm = _prepare_html()
    try:
        result = check_file(file, assignment=assignment, seed=seed, device=device, quick=quick,
                            limits=Limits(timeout_s=timeout, memory_mb=memory, load_timeout_s=load_timeout,
                                          cores=min(2, os.cpu_count() or 1)),
                            on_event=progress.phase)
    finally:
        progress.done()
    json_path = json_path or _default_report(file, "json")
    write_json_atomic(result, json_path)
    html_path = html_path or _default_report(file, "html")
    html_written = None
    warm.join()
    try:
        from .report import html as html_report
        html_report.write(result, html_path, source_path=file)
        html_written = html_path
    except ImportError:
        pass
    click.echo(terminal.summary(result, json_path=json_path, html_path=html_written))
    sys.exit(exit_code(result))


def _prepare_html() -> threading.Thread:
    """The HTML report's one-time costs (imports, fonts), paid in a thread while the child runs: the parent
    only waits for the child then."""
    def work():
        try:
            from .report import html as html_report
            html_report.prepare()
        except Exception:         # noqa: BLE001 - write() pays it instead, and reports any real problem
            pass
    t = threading.Thread(target=work, name="mtxdiag-html-warm-up", daemon=True)
    t.start()
    return t


def _register_optional():
    """Subcommands that live in their own modules."""
    for mod, name in (("harness.cli_mutants", "mutants_group"), ("harness.selftest", "selftest"),
                      ("harness.grade_cli", "grade"), ("harness.grade_cli", "gradescope")):
        try:
            module = __import__(mod, fromlist=[name])
        except ImportError:
            continue
        cmd = getattr(module, name, None)
        if cmd is not None:
            main.add_command(cmd)


_register_optional()
