"""``mtxdiag mutants``: list, show and export the mutant library.

Wired into the main CLI lazily (harness.cli.main._LazyGroup: imported when `mtxdiag mutants` is named).
"""
from __future__ import annotations

import difflib
import os
import sys
import textwrap

import click

import mutants as library

_ASSIGNMENT = click.Choice(list(library.ALL_ASSIGNMENTS))


def _select(assignment: str | None) -> list[library.Mutant]:
    """One assignment's mutants (its pack's: Pack.mutants, mutants/packs.py), or every assignment's (the lessons'
    registry, lm's, then the added packs') without one."""
    if assignment is None:
        return list(library.ALL_MUTANTS)
    return list(library.packs.of_pack(assignment))


def _counts(selected: list[library.Mutant]) -> str:
    """'12 reversal, 28 block, 56 lm': how many of each assignment, in the registry's order of assignments."""
    n = {a: sum(m.assignment == a for m in selected) for a in library.ALL_ASSIGNMENTS}
    return ", ".join(f"{k} {a}" for a, k in n.items() if k)


_WIDTH = 88


def _use_colour(mode: str) -> bool:
    """Colour only on a terminal and without NO_COLOR (https://no-color.org)."""
    if mode == "always":
        return True
    if mode == "never":
        return False
    stream = click.get_text_stream("stdout")
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("NO_COLOR")


def _style_diff_line(line: str) -> str:
    if line.startswith(("+++", "---")):
        return click.style(line, bold=True)
    if line.startswith("+"):
        return click.style(line, fg="green")
    if line.startswith("-"):
        return click.style(line, fg="red")
    if line.startswith("@@"):
        return click.style(line, fg="cyan")
    return line


def _lookup(mutant_id: str) -> library.Mutant:
    try:
        return library.get_any(mutant_id)
    except KeyError:
        ids = [m.id for m in library.ALL_MUTANTS]
        close = difflib.get_close_matches(mutant_id, ids, n=3, cutoff=0.6)
        message = f"unknown mutant {mutant_id!r}."
        if close:
            message += " Did you mean: " + ", ".join(close) + "?"
        message += " Run 'mutants list' for all ids."
        raise click.BadParameter(message, param_hint="ID") from None


@click.group(name="mutants")
def mutants_group() -> None:
    """The mutant library: known student bugs as minimal edits of the reference models."""


@mutants_group.command(name="list")
@click.option("--assignment", type=_ASSIGNMENT, default=None,
              help="Only this assignment's mutants (default: every assignment's).")
def list_command(assignment: str | None) -> None:
    """One line per mutant: id, cause, summary (an id starts with its assignment's name)."""
    selected = _select(assignment)
    if not selected:
        return
    id_width = max(len(m.id) for m in selected)
    cause_width = max(len(m.cause) for m in selected)
    for m in selected:
        click.echo(f"{m.id:<{id_width}}  {m.cause:<{cause_width}}  {m.summary}")


@mutants_group.command(name="show")
@click.argument("mutant_id", metavar="ID")
@click.option("--color", "color_mode", type=click.Choice(["auto", "always", "never"]),
              default="auto", show_default=True,
              help="Colour the diff (auto: only on a terminal and when NO_COLOR is unset).")
def show_command(mutant_id: str, color_mode: str) -> None:
    """The diff of mutant ID against its reference, its explanation and lesson passage."""
    mutant = _lookup(mutant_id)
    colour = _use_colour(color_mode)
    component = f", component: {mutant.component}" if getattr(mutant, "component", "") else ""
    click.echo(f"{mutant.id}  (cause: {mutant.cause}, assignment: {mutant.assignment}{component})", color=colour)
    click.echo(mutant.summary, color=colour)
    click.echo("", color=colour)
    for line in library.diff(mutant).splitlines():
        click.echo(_style_diff_line(line) if colour else line, color=colour)
    click.echo("", color=colour)
    heading = (lambda s: click.style(s, bold=True)) if colour else (lambda s: s)
    click.echo(heading("What is wrong"), color=colour)
    click.echo(textwrap.fill(mutant.explanation, width=_WIDTH), color=colour)
    click.echo("", color=colour)
    click.echo(heading("From the lesson"), color=colour)
    click.echo(textwrap.fill(mutant.lesson, width=_WIDTH, initial_indent="  ",
                             subsequent_indent="  "), color=colour)


@mutants_group.command(name="export")
@click.argument("directory", type=click.Path(file_okay=False, writable=True))
@click.option("--assignment", type=_ASSIGNMENT, default=None,
              help="Only this assignment's mutants (default: every assignment's, each with its assignment in "
                   "the manifests).")
@click.option("--force", is_flag=True, help="Overwrite files that already exist in DIRECTORY.")
def export_command(directory: str, assignment: str | None, force: bool) -> None:
    """Write each mutant as an anonymous submission_NN.py plus manifest.json/.csv.

    An lm mutant is also written as a repository, submission_NN/ (tests/adapters.py
    and the package it imports); a pack's mutant only as its assignment folder,
    submission_NN/ (the pack's files).

    The file names do not reveal the bug; the manifests (for the instructor) map
    each file to its mutant id, cause and assignment.
    """
    selected = _select(assignment)
    try:
        plan = library.export_submissions(directory, selected, force=force)
    except library.ExportError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(2)
    click.echo(f"wrote {len(plan)} submissions ({_counts([m for _, m in plan])}) and {library.MANIFEST_JSON}, "
               f"{library.MANIFEST_CSV} to {directory}")
    planned = {name for name, _ in plan}
    stale = sorted(p for p in os.listdir(directory)
                   if p.startswith("submission_") and p.endswith(".py") and p not in planned)
    if stale:
        click.echo(f"note: {len(stale)} other submission file(s) in {directory} are not in this "
                   f"manifest (left untouched): {', '.join(stale[:5])}", err=True)
