"""``mtxdiag grade`` and ``mtxdiag gradescope``: thin click layers over harness.grading.grade."""
from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

import click

from . import rubric as rubric_mod
from ..assignments import CHOICES, NAMES
from ..limits import GRADESCOPE_MEMORY_MB, GRADESCOPE_TIMEOUT_S, limit_options
from .grade import VISIBILITIES, GradeError, Grader, Options, gradescope_one

_ASSIGNMENT = click.Choice(list(CHOICES))


class BadInput(click.ClickException):
    """Bad folders, rubric or scheduler: 'Error: ...' on stderr, exit status 2."""
    exit_code = 2


def _rubric(path, points=None):
    try:
        return rubric_mod.with_points(rubric_mod.load(path), points)
    except rubric_mod.RubricError as e:
        raise BadInput(str(e)) from None


_POINTS = click.option("--points", type=click.FloatRange(min=0, min_open=True), default=None, metavar="N",
                       help="Scale every grade to N points (each test's score and max_score in proportion, summing "
                            "to exactly N at full marks). Default: the rubric's `total`, else its own maximum.")


@click.command("grade")
@click.argument("src", metavar="DIR", type=click.Path(path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(path_type=Path),
              help="Output folder (created; must not be inside DIR).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True,
              help="Submissions checked at once on this machine (each in its own child process).")
@click.option("--rubric", "rubric_path", type=click.Path(path_type=Path), default=None,
              help="Rubric TOML (default: the bundled rubric_default.toml).")
@limit_options(output=True, what="one submission's check")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Send the checks to a Dask distributed scheduler (tcp://HOST:PORT) instead of local workers; "
                   "the workers' threads set the parallelism (--jobs is not used) and each worker machine needs "
                   "mtxdiag installed.")
@click.option("--force", is_flag=True, help="Regrade every submission, even those already graded.")
@click.option("--quick", is_flag=True, help="Skip the training probes (a few seconds a submission).")
@click.option("--assignment", type=_ASSIGNMENT, default="auto", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--visibility", type=click.Choice(VISIBILITIES), default=None,
              help="Visibility of the tests in each Gradescope results.json that the rubric's [visibility] does "
                   "not set. Default: its default, else visible.")
@_POINTS
@click.option("--title", default=None, help="Title of the gradebook page.")
@click.option("--no-progress", is_flag=True, help="No progress lines on stderr.")
@click.option("--warm/--cold", default=True, show_default=True,
              help="Warm: each job slot keeps a sandboxed worker that imported torch once and forks a fresh "
                   "child per submission (CPU). Cold: a new sandboxed interpreter per submission.")
def grade(src, out, jobs, rubric_path, timeout, memory, load_timeout, output_mb, scheduler, force, quick, assignment, seed, device,
          visibility, points, title, no_progress, warm):
    """Grade every submission in DIR into OUT: a .py/.ipynb file per student, or a folder per student
    holding exactly one such file or one `lm` repository (a folder with tests/adapters.py). The student id
    is the file's stem or the folder's name.

    \b
    OUT/students/<id>/result.json   check result + grade (score, max_score, breakdown)
    OUT/students/<id>/report.html   the student's report
    OUT/students/<id>/results.json  Gradescope's results format
    OUT/grades.csv, OUT/index.html  the gradebook; OUT/grading.log
    A rerun reuses what is already graded (same file, same options) and recomputes scores if only
    the rubric changed; --force regrades all.

    Exit status: 0 done, 1 some grader faults (rerun to retry them), 2 bad input, 130 interrupted.
    """
    rub = _rubric(rubric_path, points)
    if timeout <= 0 or memory <= 0:
        raise BadInput("--timeout and --memory must be positive")
    opts = Options(assignment=assignment, seed=seed, device=device, quick=quick, timeout_s=timeout, memory_mb=memory,
                   jobs=jobs, scheduler=scheduler, force=force, visibility=visibility or "", output_mb=output_mb,
                   load_timeout_s=load_timeout, warm=warm)

    def on_term(signum, frame):  # a batch system's SIGTERM: stop like Ctrl-C, keeping what is finished
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, on_term) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        grader = Grader(src, out, options=opts, rubric=rub, progress=not no_progress, title=title,
                        progress_stream=click.get_text_stream("stderr"))
        summary = grader.run()
    except GradeError as e:
        raise BadInput(str(e)) from None
    except KeyboardInterrupt:
        click.echo("\nmtxdiag grade: interrupted; every finished result is kept in "
                   f"{out}/students and the gradebook was rebuilt. Run the same command again to grade the rest.",
                   err=True)
        sys.exit(130)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    from ..report.terminal import clean            # student ids are folder names: nothing of them drives the terminal
    click.echo(summary.text())
    click.echo(f"gradebook: {out / 'index.html'}  grades: {out / 'grades.csv'}  log: {out / 'grading.log'}")
    if summary.report_errors:
        click.echo(f"{len(summary.report_errors)} reports could not be written (see grading.log): "
                   + ", ".join(clean(n) for n in summary.report_errors[:10]), err=True)
    if summary.grader_faults:
        click.echo("grader faults (not the students'; rerun to retry): " +
                   ", ".join(clean(n) for n in summary.grader_faults[:20]), err=True)
        sys.exit(1)


@click.group("gradescope", invoke_without_command=True)
@click.option("--submission-dir", type=click.Path(path_type=Path), default=Path("/autograder/submission"),
              show_default=True, help="Where Gradescope puts the student's files.")
@click.option("--results", "results_path", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("/autograder/results/results.json"), show_default=True,
              help="Where Gradescope reads the results.")
@click.option("--rubric", "rubric_path", type=click.Path(path_type=Path), default=None,
              help="Rubric TOML (default: the bundled rubric_default.toml).")
@limit_options(timeout_s=GRADESCOPE_TIMEOUT_S, memory_mb=GRADESCOPE_MEMORY_MB, load_timeout=False)
@click.option("--quick", is_flag=True, help="Skip the training probes.")
@click.option("--assignment", type=_ASSIGNMENT, default="auto", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--visibility", type=click.Choice(VISIBILITIES), default=None,
              help="Visibility of the tests the rubric's [visibility] does not set. Default: its default, else "
                   "visible.")
@click.option("--stdout-visibility", type=click.Choice(VISIBILITIES), default="hidden", show_default=True,
              help="Visibility of the autograder's stdout to the student.")
@click.option("--hint-level", type=click.Choice(["cause", "line", "patch"]), default=None,
              help="What the student sees of each diagnosis: the cause only, also its line, or also a verified "
                   "patch (re-checked repairs; slower). Default: the rubric's hint_level, else line.")
@_POINTS
@click.option("--files-dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="A folder of extra files copied beside the submission in its run folder (the zip's files/, "
                   "from `gradescope build --files`).")
@click.pass_context
def gradescope(ctx, submission_dir, results_path, rubric_path, timeout, memory, quick, assignment, seed, visibility,
               stdout_visibility, hint_level, points, files_dir):
    """Entry point for Gradescope's autograder: grade the one .py/.ipynb (or the one `lm` repository with
    tests/adapters.py) in /autograder/submission and write
    /autograder/results/results.json. Exit status 0 once results.json is written; 2 on bad options.

    `mtxdiag gradescope build --assignment A --out autograder.zip` writes the zip to upload."""
    if ctx.invoked_subcommand is not None:
        return
    rub = _rubric(rubric_path, points)
    opts = Options(assignment=assignment, seed=seed, quick=quick, timeout_s=timeout, memory_mb=memory,
                   visibility=visibility or "", stdout_visibility=stdout_visibility, hint=hint_level or "",
                   support=str(files_dir.resolve()) if files_dir else "")
    try:
        done = gradescope_one(submission_dir, results_path, options=opts, rubric=rub)
    except GradeError as e:
        raise BadInput(str(e)) from None
    res, result = done["results"], done["result"]
    try:
        from ..report import terminal
        click.echo(terminal.summary(result, color=False))
    except Exception:
        click.echo(f"verdict: {result['verdict']}")
    click.echo(f"score: {res['score']:g} / {result['grade']['max_score']:g}  -> {results_path}")


@gradescope.command("build")
@click.option("--assignment", type=click.Choice(list(NAMES)), required=True,
              help="reversal, block (one .py/.ipynb), or lm (a repository with tests/adapters.py, per component).")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=Path("autograder.zip"),
              show_default=True)
@click.option("--force", is_flag=True, help="Replace --out if it already exists.")
@click.option("--rubric", "rubric_path", type=click.Path(path_type=Path), default=None,
              help="Rubric TOML (default: the bundled rubric_default.toml).")
@limit_options(timeout_s=GRADESCOPE_TIMEOUT_S, memory_mb=GRADESCOPE_MEMORY_MB, load_timeout=False)
@click.option("--quick", is_flag=True, help="Skip the training probes.")
@click.option("--files", "files", multiple=True, type=click.Path(path_type=Path), metavar="PATH",
              help="An extra file or folder the student's code reads (data, a helper module), shipped under files/ "
                   "and copied beside the submission in its run folder; repeat for more (at most 32 MB in all).")
@click.option("--requirements", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="A pip requirements file that setup.sh installs after mtxdiag, torch held at its pin "
                   "(requirement lines only: no options, local paths or torch).")
@_POINTS
def gradescope_build(assignment, out, force, rubric_path, timeout, memory, quick, files, requirements, points):
    """Write Gradescope's autograder zip: setup.sh (CPU torch pinned, this project, the assignment's allowed
    packages, --requirements), run_autograder, rubric.toml (for lm with its per-component [lm] table), the
    project and the --files. Upload it as the assignment's autograder (Ubuntu base image, at least 2 CPUs and
    3 GB, timeout >= 10 minutes). An existing --out is left alone unless --force."""
    from .gradescope_build import build
    try:
        names = build(assignment, out, rubric_path=rubric_path, timeout=timeout, memory=memory, quick=quick,
                      force=force, files=files, requirements=requirements, points=points)
    except (ValueError, rubric_mod.RubricError, OSError) as e:
        raise BadInput(str(e)) from None
    extra = (", files/" if files else "") + (", requirements.txt" if requirements else "")
    click.echo(f"wrote {out} ({len(names)} files: setup.sh, run_autograder, rubric.toml, mtxdiag/{extra})")


@gradescope.command("run")
@click.argument("zip_path", metavar="ZIP", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("submission", metavar="SUBMISSION", type=click.Path(path_type=Path))
@click.option("--keep", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Make the stand-in of /autograder here (a new or empty folder) and leave it: source/, "
                   "submission/, results/results.json, results/stdout, setup.log.")
@click.option("--no-setup", is_flag=True,
              help="Skip setup.sh: run_autograder runs this interpreter with the zip's mtxdiag/ on PYTHONPATH "
                   "(this environment's packages). Default: setup.sh makes a venv under the stand-in with "
                   "--system-site-packages (nothing is downloaded that is installed here) and pip-installs the "
                   "zip's mtxdiag/ into it.")
@click.option("--time-limit", type=click.FloatRange(min=1), default=1200, show_default=True,
              help="Seconds run_autograder may take (Gradescope's own limit is the assignment's setting).")
def gradescope_run(zip_path, submission, keep, no_setup, time_limit):
    """Run an autograder zip on SUBMISSION (a file, or a folder of what the student uploads) as Gradescope
    would, locally and without root: unpack it into a stand-in of /autograder (source/, submission/,
    results/), run setup.sh and run_autograder, then check results.json against Gradescope's format.

    Exit status: 0 results.json written and valid; 1 missing or invalid (or setup failed); 2 bad input."""
    from .gradescope_run import RunError, local_run, summary
    try:
        run = local_run(zip_path, submission, keep=keep, setup=not no_setup, run_limit=time_limit)
    except RunError as e:
        raise BadInput(str(e)) from None
    click.echo(summary(run, str(submission)))
    if not run.ok:
        sys.exit(1)
