"""The limits a check runs under: one declared default each, and the click options every command shares.

runner.Limits, grade's Options and the CLI's flags read these; nothing else writes a default limit."""
from __future__ import annotations

TIMEOUT_S = 180.0          # wall clock of one check (a full check of correct code takes seconds; training probes)
MEMORY_MB = 6144           # the child's address space
LOAD_TIMEOUT_S = 30.0      # loading (definitions only) that runs longer ends as `timeout` during load
OUTPUT_MB = 1.0            # more stdout/stderr than this is a finding (check `output-flood`)
RUN_FOLDER_MB = 256        # what a run's folder may hold in all (its submission copy is <= 40 MB; each file
                           # <= Limits.file_mb): the parent ends a run past it (diskwatch.py)
RESULT_MB = 4              # the most the parent reads of a check's result channel, and the most a validated result may
                           # take as JSON (a correct model's is well under 1 MB): past it, the student's error
SUPPORT_MB = 32            # the instructor's extra files (`gradescope build --files`) in all, copied into every run's
SUPPORT_FILES = 1000       # folder beside the submission (isolation/support_files.py)
# Gradescope's autograder container (a smaller machine, one submission at a time)
GRADESCOPE_TIMEOUT_S = 300.0
GRADESCOPE_MEMORY_MB = 4096


def limit_options(*, timeout_s: float = TIMEOUT_S, memory_mb: int = MEMORY_MB, load_timeout: bool = True,
                  output: bool = False, what: str = "the check"):
    """The --timeout/--memory (and --load-timeout, --max-output-mb) options, with the declared defaults."""
    import click
    opts = [click.option("--timeout", type=float, default=timeout_s, show_default=True,
                         help=f"Wall-clock limit of {what}, in seconds."),
            click.option("--memory", type=int, default=memory_mb, show_default=True,
                         help=f"Memory limit of {what} in MB.")]
    if load_timeout:
        opts.append(click.option("--load-timeout", type=click.FloatRange(min=1.0), default=LOAD_TIMEOUT_S,
                                 show_default=True, help="Seconds loading a submission (definitions only) may take "
                                                         "before it ends as `timeout`."))
    if output:
        opts.append(click.option("--max-output-mb", "output_mb", type=click.FloatRange(min=0), default=OUTPUT_MB,
                                 show_default=True, help="More stdout/stderr than this is an integrity finding "
                                                         "(the output kept is bounded anyway)."))

    def decorate(f):
        for o in reversed(opts):
            f = o(f)
        return f
    return decorate
