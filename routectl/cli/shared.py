"""What the command modules share: the options every judging command takes (`verdict_options`,
`baseline_options`), emitting a verdict, and judging the working tree against a baseline.
Command modules import this module and `routectl.cli`, never each other."""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import click

from routectl.cli import CheckFailed, CliState, OutputPath, warn
from routectl.errors import InputError
from routectl.io import jsonwrite, output
from routectl.io.schemas import schema_violation
from routectl.io.terminal import COLOR_CHOICES, use_color
from routectl.project import Project
from routectl.review.baseline import BaselineFailed, baseline_at_ref, ref_advice
from routectl.review.cache import ReplayCache, cache_disabled, ref_baseline_key
from routectl.review.check import (
    CheckResult,
    baseline_only,
    expected_document,
    fresh_snapshots,
    judge_against,
)
from routectl.review.coverage import delta_line, reached_delta
from routectl.review.expected import (
    TODO_REASON,
    ExpectedChanges,
    is_todo,
    load_expected_changes,
    merge_expected,
    stated_document,
)
from routectl.review.markdown import render_markdown
from routectl.review.report import (
    FORMATS,
    MAX_FIELD_CHANGES,
    MAX_ROWS,
    MAX_VALUE_CHARS,
    RenderOptions,
    build_report,
    render,
    render_json,
)
from routectl.review.snapshot import read_json, write_json, write_text
from routectl.review.sources import SnapshotFiles, open_baseline

CATEGORY_HELP = "Category name (repeatable; default: every category)."


def is_ci(environ: Mapping[str, str]) -> bool:
    """CI is set to anything but empty, "0" or "false"."""
    return environ.get("CI", "") not in ("", "0", "false")


def terminal_columns() -> int | None:
    """The width of the terminal standard output writes to; None for a file or a pipe."""
    if not sys.stdout.isatty():
        return None
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError):
        return None


def note(message: str) -> None:
    click.echo(message, err=True)


def snapshots_folder(project: Project) -> Path:
    if project.snapshots is None:
        raise InputError(f"project {project.name} has no snapshot folder")
    return project.snapshots


def cache_options(function: Any) -> Any:
    """`--no-cache` and `-v/--verbose` (name the replayed categories); the command receives
    `no_cache` and `verbose`."""
    function = click.option(
        "-v",
        "--verbose",
        is_flag=True,
        help="Name the categories replayed (the others' rows came from the replay cache).",
    )(function)
    return click.option(
        "--no-cache",
        is_flag=True,
        help="Replay every row; neither read nor write .routectl_cache/ "
        "(also ROUTECTL_NO_CACHE=1).",
    )(function)


def replay_cache(cli_state: CliState, project: Project, no_cache: bool) -> ReplayCache | None:
    """The project's replay cache, None when it is off (--no-cache, ROUTECTL_NO_CACHE)."""
    if no_cache or cache_disabled(cli_state.environ):
        return None
    return ReplayCache.for_project(project, warn)


def note_replayed(cache: ReplayCache | None, verbose: bool) -> None:
    """-v: one line naming the replayed categories (all of them with the cache off)."""
    if not verbose:
        return
    if cache is None:
        note("replayed every category (replay cache off)")
        return
    replayed = ", ".join(cache.replayed) or "none"
    baseline = {None: "", True: "; baseline from the replay cache", False: "; baseline computed"}
    matched = len(cache.retained_hits)
    files = f"; snapshot files known to hold those rows: {matched}" if matched else ""
    note(
        f"replayed: {replayed}; from the replay cache: {len(cache.hits)} categories"
        f"{files}{baseline[cache.baseline_hit]}"
    )


@dataclass(frozen=True)
class VerdictOptions:
    """The options of every command that judges rows against a baseline (check, diff)."""

    expected_changes: Path | None
    write_expected: Path | None
    write_expected_ids: Path | None
    fmt: str
    report_file: Path | None
    summary_file: Path | None
    color: str
    quiet: bool
    max_rows: int
    max_fields: int
    prune: bool
    full: bool


def verdict_options(function: Any) -> Any:
    """Add the verdict options; the command receives them as one `VerdictOptions` named
    `verdict`."""
    names = [f.name for f in fields(VerdictOptions)]
    options = [
        click.option(
            "--expected-changes",
            type=click.Path(path_type=Path, dir_okay=False),
            default=None,
            help="JSON file of the changes this change is expected to make: row ids, "
            "or stated entries (row patterns with their field changes).",
        ),
        click.option(
            "--write-expected",
            type=OutputPath(path_type=Path, dir_okay=False, allow_dash=True),
            default=None,
            help="Write the actual changes as stated entries, one per change group "
            "(reasons TODO), for review (- for stdout). Onto an existing file it merges: "
            "entries that still describe a change are kept with their reasons.",
        ),
        click.option(
            "--prune",
            is_flag=True,
            help="With --write-expected: drop the entries that describe no change of this "
            "run (the previous file is kept as FILE.orig).",
        ),
        click.option(
            "--write-expected-ids",
            type=OutputPath(path_type=Path, dir_okay=False, allow_dash=True),
            default=None,
            help="Write the actual changes as one {id, reason} entry per row (- for stdout).",
        ),
        click.option(
            "--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True
        ),
        click.option(
            "--report",
            "report_file",
            type=OutputPath(path_type=Path, dir_okay=False, allow_dash=True),
            default=None,
            help="Also write the JSON report to this file (- for stdout).",
        ),
        click.option(
            "--summary",
            "summary_file",
            type=OutputPath(path_type=Path, dir_okay=False, allow_dash=True),
            default=None,
            help='Append a Markdown summary to this file (e.g. "$GITHUB_STEP_SUMMARY").',
        ),
        click.option(
            "--color", type=click.Choice(COLOR_CHOICES), default="auto", show_default=True
        ),
        click.option(
            "-q",
            "--quiet",
            is_flag=True,
            help="Text: only each category's verdict line and the final line.",
        ),
        click.option(
            "--max-rows",
            type=click.IntRange(min=0),
            default=MAX_ROWS,
            show_default=True,
            metavar="N",
            help="Text: ids shown per change group no row patterns describe (0 = all).",
        ),
        click.option(
            "--max-fields",
            type=click.IntRange(min=0),
            default=MAX_FIELD_CHANGES,
            show_default=True,
            metavar="N",
            help="Text: field changes shown per change group (0 = all).",
        ),
        click.option(
            "--full",
            is_flag=True,
            help=f"Text: show values whole (longer than {MAX_VALUE_CHARS} characters they are "
            f"shortened; the other formats always show them whole).",
        ),
    ]

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["verdict"] = VerdictOptions(**{n: kwargs.pop(n) for n in names})
        if kwargs["verdict"].prune and kwargs["verdict"].write_expected is None:
            raise click.UsageError("--prune only applies with --write-expected FILE")
        return function(*args, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def read_expected(project: Project, path: Path | None) -> ExpectedChanges:
    if path is None:
        return ExpectedChanges()
    return load_expected_changes(path, [c.name for c in project.categories])


def warn_todo_reasons(
    reasons: Sequence[str], path: Path | None, environ: Mapping[str, str]
) -> None:
    """In CI, a reason --write-expected left for the reviewer is a review not done."""
    todo = sum(1 for reason in reasons if is_todo(reason))
    if todo and path is not None and is_ci(environ):
        warn(
            f"{path}: {todo} expected change(s) still have a {TODO_REASON} reason: say why "
            f"each change is intended"
        )


def next_step(command: str, options: VerdictOptions, *, broken: bool = False) -> str:
    """The one line a failing text check ends with: what to run next (for a broken
    invariance, which no expected change excuses: the change or the declaration)."""
    if broken:
        return (
            "next: a declared invariance is broken: fix the change, or, if that dimension "
            "now matters on purpose, change the category's invariances (docs/invariances.md)"
        )
    if options.expected_changes is None:
        if options.write_expected is not None:
            target = options.write_expected
            return (
                f"next: review {target} (one entry per change group), replace each "
                f"TODO reason, then {command} --expected-changes {target}"
            )
        target = Path("route-changes.json")
        return (
            f"next: {command} --write-expected {target}, review it and replace each "
            f"TODO reason, then {command} --expected-changes {target}"
        )
    return (
        f"next: {command} --expected-changes {options.expected_changes} --write-expected "
        f"{options.expected_changes} restates the actual changes for review; once "
        f"reviewed, pass it again (and, for check, --update)"
    )


def is_stdout(path: Path) -> bool:
    """`-`: standard output, for every option that names a file to write."""
    return str(path) == "-"


def shown(path: Path) -> str:
    return "standard output" if is_stdout(path) else str(path)


def write_output(path: Path, data: str | bytes) -> None:
    """`data` to standard output for `-`, else written to `path` (atomically onto a regular
    file, in place onto a device or FIFO: `routectl.io.output`)."""
    if not is_stdout(path):
        write_text(path, data)
        return
    sys.stdout.flush()  # after what click already echoed
    # The binary layer under the text stream (click 8.5 deprecates get_binary_stream).
    stream = sys.stdout.buffer
    stream.write(data.encode("utf-8") if isinstance(data, str) else data)
    stream.flush()


def _write_document(path: Path, document: Any, count: int, project: Project) -> None:
    problem = schema_violation("expected-changes", document)
    if problem is not None:
        raise InputError(f"refusing to write {path}: {problem}")
    write_output(path, jsonwrite.dumps_bytes(document))
    entries = "entry" if count == 1 else "entries"
    note(f"wrote {count} expected-changes {entries} to {shown(path)}")


def _known_ids(project: Project, result: CheckResult) -> Callable[[str], Collection[str]]:
    declared: dict[str, Collection[str]] = {}

    def known(name: str) -> Collection[str]:
        verdict = result.outcome.categories.get(name)
        if verdict is not None:
            return verdict.comparison.fresh_ids | verdict.comparison.baseline_ids
        if name not in declared:
            declared[name] = {r.id for r in project.category(name).rows()}
        return declared[name]

    return known


def write_stated(path: Path, result: CheckResult, project: Project, *, prune: bool) -> None:
    """--write-expected: the actual changes as stated entries; onto an existing file,
    merged (`merge_expected`): reviewed reasons are kept, and nothing is written when the
    file already states every change. The previous file is kept as FILE.orig when an entry
    is dropped."""
    verdicts = list(result.outcome.categories.values())
    # Only a regular file holds entries to merge: standard output, a device or a FIFO is
    # written in place as a fresh document.
    if str(path) == "-" or not path.is_file():
        stated = stated_document(verdicts)
        if not stated["changes"]:
            note(f"no change to write: {path} not written")
            return
        _write_document(path, stated, len(stated["changes"]), project)
        return
    names = list(dict.fromkeys([*(c.name for c in project.categories), *result.outcome.categories]))
    merge = merge_expected(
        read_json(path, "expected-changes file"),
        verdicts,
        names,
        _known_ids(project, result),
        source=str(path),
        prune=prune,
    )
    for index, rows, why in merge.obsolete:
        state = "dropped" if prune else "obsolete"
        note(f"{state}: {path} entry [{index}] (rows {rows}): {why}")
    if merge.document is None:
        hint = " (--prune drops the obsolete entries)" if merge.obsolete else ""
        note(
            f"{path} already states every change: nothing to write, the file is left "
            f"as it was{hint}"
        )
        return
    problem = schema_violation("expected-changes", merge.document)
    if problem is not None:
        raise InputError(f"refusing to write {path}: {problem}")
    if merge.dropped:
        orig = path.with_name(path.name + ".orig")
        write_text(orig, path.read_bytes())
    write_json(path, merge.document)
    parts = [f"{merge.kept} kept with their reasons", f"{merge.new} new"]
    if merge.restated:
        parts.append(f"{merge.restated} restated by identity")
    if merge.dropped:
        parts.append(f"{merge.dropped} dropped; the previous file is {path}.orig")
    count = len(merge.document["changes"])
    note(
        f"wrote {count} expected-changes {'entry' if count == 1 else 'entries'} to {path} "
        f"({', '.join(parts)})"
    )


def append_text(path: Path, text: str) -> None:
    """Append, as `$GITHUB_STEP_SUMMARY` expects (each step adds its part), all or nothing:
    a write that fails part way (a full disk, a file-size limit) is cut back to the file's
    old length, so no half table is left for the next step to append to."""
    kind = None if is_stdout(path) else output.special_kind(path)
    if is_stdout(path) or kind is not None:  # a device or FIFO: written in place, as ever
        write_output(path, text)
        return
    data = memoryview(text.encode("utf-8"))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOCTTY, 0o666)
    except OSError as exc:
        raise InputError(f"cannot append to {path}: {exc.strerror or exc}") from None
    try:
        status = os.fstat(fd)
        regular = stat.S_ISREG(status.st_mode)
        try:
            while data:
                data = data[os.write(fd, data) :]
        except BaseException:
            if regular:  # (made something else since it was looked at: left as it is)
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, status.st_size)
            raise
    except OSError as exc:
        raise InputError(f"cannot append to {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def finish(result: CheckResult, options: VerdictOptions, command: str) -> None:
    """End a run: a failing text check's last stderr line says what to run next."""
    if result.ok:
        return
    if options.fmt == "text":
        broken = any(v.broken for v in result.outcome.categories.values())
        note(next_step(command, options, broken=broken))
    raise CheckFailed()


def emit_verdict(
    result: CheckResult,
    project: Project,
    *,
    environ: Mapping[str, str],
    options: VerdictOptions,
    command: str = "routectl check",
) -> None:
    """Write the requested report files, then print the outcome in the chosen format to
    stdout. `command` is the command line that judged (its first two words name it in
    annotations and summaries). The caller ends with `finish`."""
    name = command.split()[1]
    report = build_report(result.outcome)
    if options.report_file is not None:
        write_output(options.report_file, render_json(report))
        note(f"wrote report {shown(options.report_file)}")
    if options.write_expected is not None:
        write_stated(options.write_expected, result, project, prune=options.prune)
    if options.write_expected_ids is not None:
        ids = expected_document(result)
        _write_document(options.write_expected_ids, ids, len(ids), project)
    if options.summary_file is not None:
        append_text(options.summary_file, render_markdown(result.outcome, command=name))
    fmt = options.fmt
    color_on = fmt == "text" and use_color(options.color, environ, sys.stdout.isatty())
    click.echo(
        render(
            result.outcome,
            fmt,
            RenderOptions(
                command=name,
                color=color_on,
                quiet=options.quiet,
                max_rows=options.max_rows,
                max_fields=options.max_fields,
                full=options.full,
            ),
        ),
        nl=False,
        color=color_on,
    )
    line = coverage_line(result, project)
    if line is not None:
        # One line for the reviewer; stdout holds only the document in the other formats.
        if fmt == "text":
            click.echo(line)
        else:
            note(line)


def coverage_line(result: CheckResult, project: Project) -> str | None:
    """`coverage: +N sites reached (...), -M (... no longer reached)` when the rows that
    moved add or remove reached decision sites (`routectl.review.coverage`); None else."""
    listed = {c.name: c for c in project.categories}
    deltas = {}
    for name, fresh in result.fresh.items():
        category = listed.get(name)
        baseline = result.baseline.get(name)
        if category is None or baseline is None:
            continue
        moved = result.comparison(name).moved
        deltas[name] = reached_delta(category, baseline.rows, fresh.rows, moved)
    return delta_line(deltas)


def note_baseline_only(project: Project, result: CheckResult) -> None:
    for name in baseline_only(project, result):
        note(f"category {name} is only in the baseline: its rows are reported removed")


def _against_ref(
    project: Project,
    ref: str,
    names: Sequence[str],
    *,
    environ: Mapping[str, str],
    expected_file: Path | None,
    debug: bool,
    jobs: int,
    cache: ReplayCache | None,
) -> CheckResult:
    if project.root is None:
        raise InputError(f"project {project.name} has no root folder")
    selected = [c for c in project.categories if not names or c.name in names]
    key = None
    if cache is not None:
        # Keyed by REF's tree: a cached baseline is what that tree's code wrote before.
        commit, key = ref_baseline_key(project, ref, environ=environ, inputs=cache.inputs)
        folder = cache.baseline_folder(key)
        if folder is not None:
            fresh = fresh_snapshots(project, selected, jobs=jobs, cache=cache)
            source = SnapshotFiles.baseline_folder(
                folder, advice=ref_advice(ref), schema=project.snapshot_schema
            )
            result = judge_against(project, names, source, expected_file=expected_file, fresh=fresh)
            note_baseline_only(project, result)
            note(f"baseline: {ref} = {commit[:12]}, computed by that commit's own code")
            return result
    prefixes = (project.variable_prefix,) if project.variable_prefix else ()
    with baseline_at_ref(
        project.root, ref, environ=environ, strip_prefixes=prefixes, debug=debug
    ) as build:
        # The candidate replays here while the baseline runs in its own process.
        fresh = fresh_snapshots(project, selected, jobs=jobs, cache=cache)
        try:
            source = build.source(schema=project.snapshot_schema)
        except BaselineFailed as exc:
            if debug:  # prefixed: its `error:` lines are the old program's, not ours
                for line in exc.output.splitlines():
                    click.echo(f"baseline> {line}", err=True)
            raise
        result = judge_against(project, names, source, expected_file=expected_file, fresh=fresh)
        if cache is not None and key is not None:
            cache.store_baseline(key, build.output_dir)
    note_baseline_only(project, result)
    note(f"baseline: {ref} = {build.commit[:12]}, computed by that commit's own code")
    return result


def _against_files(
    project: Project,
    path: Path,
    names: Sequence[str],
    *,
    expected_file: Path | None,
    jobs: int,
    cache: ReplayCache | None,
) -> CheckResult:
    source = open_baseline(path, schema=project.snapshot_schema)
    if not path.is_dir():
        # One file is one category: the run judges that category only.
        (category,) = source.names()
        others = sorted(set(names) - {category})
        if others:
            raise click.UsageError(
                f"--baseline {path} holds only category {category}; "
                f"-c also names {', '.join(others)}"
            )
        names = (category,)
    result = judge_against(
        project, names, source, expected_file=expected_file, jobs=jobs, cache=cache
    )
    note_baseline_only(project, result)
    return result


def against_baseline(
    cli_state: CliState,
    project: Project,
    ref: str | None,
    baseline_path: Path | None,
    categories: Sequence[str],
    *,
    expected_file: Path | None,
    jobs: int,
    cache: ReplayCache | None = None,
) -> CheckResult:
    """The working tree's rows judged against REF's own rows or pre-built snapshots (the
    caller gives exactly one); `diff` and the route matrix views share it. `cache` holds
    rows (and REF's baselines) computed before."""
    if ref is not None:
        return _against_ref(
            project,
            ref,
            categories,
            environ=cli_state.environ,
            expected_file=expected_file,
            debug=cli_state.debug,
            jobs=jobs,
            cache=cache,
        )
    assert baseline_path is not None
    return _against_files(
        project, baseline_path, categories, expected_file=expected_file, jobs=jobs, cache=cache
    )


def baseline_options(function: Any) -> Any:
    options = [
        click.option(
            "--baseline-ref",
            "ref",
            metavar="REF",
            default=None,
            help="Mark what changed against the rows git ref REF's code computes.",
        ),
        click.option(
            "--baseline",
            "baseline_path",
            type=click.Path(path_type=Path),
            default=None,
            help="Mark what changed against pre-built snapshots.",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function
