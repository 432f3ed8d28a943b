"""`routectl list`, `snapshot`, `check` and `explain`: route snapshots from the command line.

Every input is read and validated before the first write, so an input error (exit 2)
leaves every file as it was.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, cast

import click

from routectl.cli import (
    CheckFailed,
    OutputPath,
    cli,
    complete_category,
    complete_row_id,
    job_count,
    jobs_option,
    project_option,
    state,
    warn,
)
from routectl.cli.config_cmd import policy_document
from routectl.errors import InputError
from routectl.io.jsonread import shorten
from routectl.io.schemas import SCHEMA_VERSION, schema_violation
from routectl.policy.resolve import ResolvedPolicy
from routectl.project import Project
from routectl.replay.harness import find_row, replay_row
from routectl.review.check import (
    CheckResult,
    DirectorySource,
    expected_document,
    fresh_snapshots,
    run_check,
    select_categories,
)
from routectl.review.compare import split_id
from routectl.review.expected import (
    TODO_REASON,
    ExpectedChanges,
    is_todo,
    load_expected_changes,
    stated_document,
)
from routectl.review.markdown import render_markdown
from routectl.review.report import (
    COLOR_CHOICES,
    FORMATS,
    MAX_FIELD_CHANGES,
    MAX_ROWS,
    build_report,
    render,
    render_json,
    use_color,
)
from routectl.review.snapshot import (
    NEW_SUFFIX,
    dump_json,
    plain_rows,
    stale_new_files,
    write_json,
    write_snapshot,
    write_text,
)
from routectl.rows import RowSpec
from routectl.suggest import closest

CATEGORY_HELP = "Category name (repeatable; default: every category)."


def is_ci(environ: Mapping[str, str]) -> bool:
    """CI is set to anything but empty, "0" or "false"."""
    return environ.get("CI", "") not in ("", "0", "false")


def note(message: str) -> None:
    click.echo(message, err=True)


def snapshot_dir(project: Project) -> Path:
    if project.snapshot_dir is None:
        raise InputError(f"project {project.name} has no snapshot folder")
    return project.snapshot_dir


# --- list ----------------------------------------------------------------------------------

PROBE_PREFIX = "edge:"


def category_summary(category: Any, *, with_rows: bool) -> dict[str, Any]:
    """One category for `list --format json`: what it covers and how many rows it has."""
    ids = sorted(spec.id for spec in category.rows())
    probes = [i.removeprefix(PROBE_PREFIX) for i in ids if i.startswith(PROBE_PREFIX)]
    summary: dict[str, Any] = {
        "name": category.name,
        # A category may leave its description out; the list then shows none.
        "description": getattr(category, "description", None),
        "rows": len(ids),
        "matrix_rows": len(ids) - len(probes),
        "probes": probes,
    }
    if with_rows:
        summary["ids"] = ids
    return summary


@cli.command("list")
@click.option(
    "-c",
    "--category",
    "categories",
    multiple=True,
    help=CATEGORY_HELP,
    shell_complete=complete_category,
)
@click.option("--rows", "show_rows", is_flag=True, help="Also list every row id (qualified).")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@project_option
@click.pass_context
def list_command(
    ctx: click.Context,
    categories: tuple[str, ...],
    show_rows: bool,
    fmt: str,
    project_dir: Path | None,
) -> None:
    """List the categories, their row counts and descriptions."""
    project = state(ctx).project(project_dir)
    selected = select_categories(project, categories)
    summaries = [category_summary(c, with_rows=show_rows) for c in selected]
    if fmt == "json":
        click.echo(dump_json({"schema_version": SCHEMA_VERSION, "categories": summaries}), nl=False)
        return
    width = max((len(s["name"]) for s in summaries), default=0)
    for s in summaries:
        counts = f"{s['rows']:,} rows ({s['matrix_rows']:,} + {len(s['probes'])} probes)"
        description = f"  {s['description']}" if s["description"] else ""
        click.echo(f"{s['name']:<{width}}  {counts}{description}")
        for row_id in s.get("ids", ()):
            click.echo(f"  {s['name']}:{row_id}")


# --- snapshot ------------------------------------------------------------------------------


@cli.command("snapshot")
@click.option(
    "-c",
    "--category",
    "categories",
    multiple=True,
    help=CATEGORY_HELP,
    shell_complete=complete_category,
)
@click.option("--all", "all_categories", is_flag=True, help="Every category.")
@click.option(
    "-o",
    "--output",
    type=OutputPath(path_type=Path, dir_okay=False, allow_dash=True),
    default=None,
    help="Write one category's snapshot to this file (- for stdout).",
)
@click.option(
    "--output-dir",
    type=OutputPath(path_type=Path, file_okay=False),
    default=None,
    help="Write <category>.json per category into this folder.",
)
@jobs_option
@project_option
@click.pass_context
def snapshot_command(
    ctx: click.Context,
    categories: tuple[str, ...],
    all_categories: bool,
    output: Path | None,
    output_dir: Path | None,
    jobs: int,
    project_dir: Path | None,
) -> None:
    """Replay categories and write their snapshots.

    `python -m routectl snapshot --all --output-dir DIR` is a stable interface.
    """
    if (output is None) == (output_dir is None):
        raise click.UsageError("give exactly one of -o FILE and --output-dir DIR")
    if bool(categories) == all_categories:
        raise click.UsageError("name categories with -c CATEGORY or pass --all (not both)")
    project = state(ctx).project(project_dir)
    selected = select_categories(project, categories)
    if output is not None and len(selected) != 1:
        raise click.UsageError(
            f"-o writes one category; {len(selected)} selected (use --output-dir)"
        )
    # Everything replayed before any write.
    snapshots = fresh_snapshots(project, selected, jobs=job_count(jobs))
    if output is not None and str(output) == "-":
        (snap,) = snapshots.values()
        click.echo(dump_json(snap.to_json()), nl=False)
        return
    for snap in snapshots.values():
        path = output if output is not None else cast(Path, output_dir) / f"{snap.category}.json"
        write_snapshot(path, snap, snapshot_dir=project.snapshot_dir)
        note(f"wrote {path} ({len(snap.rows)} rows)")


# --- check ---------------------------------------------------------------------------------


def _new_path(directory: Path, name: str) -> Path:
    return directory / f"{name}.json{NEW_SUFFIX}"


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
            type=OutputPath(path_type=Path, dir_okay=False),
            default=None,
            help="Write the actual changes as stated entries, one per change group "
            "(reasons TODO), for review.",
        ),
        click.option(
            "--write-expected-ids",
            type=click.Path(path_type=Path, dir_okay=False),
            default=None,
            help="Write the actual changes as one {id, reason} entry per row.",
        ),
        click.option(
            "--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True
        ),
        click.option(
            "--report",
            "report_file",
            type=OutputPath(path_type=Path, dir_okay=False),
            default=None,
            help="Also write the JSON report to this file.",
        ),
        click.option(
            "--summary",
            "summary_file",
            type=click.Path(path_type=Path, dir_okay=False),
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
    ]

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["verdict"] = VerdictOptions(**{n: kwargs.pop(n) for n in names})
        return function(*args, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def read_expected(project: Project, path: Path | None) -> ExpectedChanges:
    if path is None:
        return ExpectedChanges()
    return load_expected_changes(
        path, [c.name for c in project.categories], snapshot_dir=project.snapshot_dir
    )


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


def next_step(command: str, options: VerdictOptions) -> str:
    """The one line a failing text check ends with: what to run next."""
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


def _write_document(path: Path, document: Any, count: int, project: Project) -> None:
    problem = schema_violation("expected-changes", document, project.snapshot_dir)
    if problem is not None:
        raise InputError(f"refusing to write {path}: {problem}")
    write_json(path, document)
    note(f"wrote {count} expected-changes {'entry' if count == 1 else 'entries'} to {path}")


def append_text(path: Path, text: str) -> None:
    """Append, as `$GITHUB_STEP_SUMMARY` expects (each step adds its part)."""
    try:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise InputError(f"cannot append to {path}: {exc.strerror or exc}") from None


def finish(result: CheckResult, options: VerdictOptions, command: str) -> None:
    """End a run: a failing text check's last stderr line says what to run next."""
    if result.ok:
        return
    if options.fmt == "text":
        note(next_step(command, options))
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
        write_text(options.report_file, render_json(report, project.snapshot_dir))
        note(f"wrote report {options.report_file}")
    if options.write_expected is not None:
        stated = stated_document(list(result.outcome.categories.values()))
        _write_document(options.write_expected, stated, len(stated["changes"]), project)
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
            command=name,
            color=color_on,
            quiet=options.quiet,
            max_rows=options.max_rows,
            max_fields=options.max_fields,
            snapshot_dir=project.snapshot_dir,
        ),
        nl=False,
        color=color_on,
    )


def _update_retained(result: CheckResult, project: Project, directory: Path) -> None:
    written = 0
    for name, snap in result.fresh.items():
        if not result.comparison(name).identical:
            write_snapshot(directory / f"{name}.json", snap, snapshot_dir=project.snapshot_dir)
            note(f"updated {directory / f'{name}.json'} ({len(snap.rows)} rows)")
            written += 1
    if result.outcome.complete:
        for name in result.outcome.stale:
            path = directory / f"{name}.json"
            path.unlink(missing_ok=True)
            note(f"removed stale {path}")
    if not written and not result.outcome.stale:
        note("retained snapshots already match")


def _settle_new_files(
    result: CheckResult, project: Project, directory: Path, *, failed: bool
) -> None:
    """A failing check leaves `<category>.json.new` for each category whose rows differ; any
    other `.json.new` of a judged category (of every category, in a complete run) goes."""
    keep: set[str] = set()
    if failed:
        for name, snap in result.fresh.items():
            if not result.comparison(name).identical:
                path = _new_path(directory, name)
                write_snapshot(path, snap, snapshot_dir=project.snapshot_dir)
                note(f"wrote {path}")
                keep.add(name)
    scope = None if result.outcome.complete else list(result.fresh)
    for path in stale_new_files(directory, scope):
        if path.name.removesuffix(".json" + NEW_SUFFIX) not in keep:
            path.unlink(missing_ok=True)


@cli.command("check")
@click.option(
    "-c",
    "--category",
    "categories",
    multiple=True,
    help=CATEGORY_HELP,
    shell_complete=complete_category,
)
@verdict_options
@click.option(
    "--update",
    is_flag=True,
    help="Rewrite retained snapshots when the differences are exactly the expected "
    "ones (never in CI).",
)
@click.option("--accept-all", is_flag=True, help="With --update: accept every difference.")
@jobs_option
@project_option
@click.pass_context
def check_command(
    ctx: click.Context,
    categories: tuple[str, ...],
    verdict: VerdictOptions,
    update: bool,
    accept_all: bool,
    jobs: int,
    project_dir: Path | None,
) -> None:
    """Replay every row and compare it with the retained snapshots.

    Exit 0 when equal or when the differences are exactly the expected ones; 1 otherwise.
    """
    environ = state(ctx).environ
    if accept_all and not update:
        raise click.UsageError("--accept-all only applies with --update")
    if update and is_ci(environ):
        raise InputError(
            f"--update refuses to write retained snapshots in CI "
            f"(CI={environ.get('CI')!r}); run it locally"
        )
    project = state(ctx).project(project_dir)
    directory = snapshot_dir(project)
    expected = read_expected(project, verdict.expected_changes)
    warn_todo_reasons(expected.reasons, verdict.expected_changes, environ)
    baseline = DirectorySource(directory, snapshot_dir=project.snapshot_dir)
    result = run_check(
        project, categories, baseline=baseline, expected=expected, jobs=job_count(jobs)
    )

    emit_verdict(result, project, environ=environ, options=verdict)
    if update and (result.ok or accept_all):
        _update_retained(result, project, directory)
        _settle_new_files(result, project, directory, failed=False)
        return
    _settle_new_files(result, project, directory, failed=not result.ok)
    if update:
        warn(
            "retained snapshots not updated: the differences are not exactly the expected "
            "ones (list them with --expected-changes, or pass --accept-all)"
        )
    finish(result, verdict, "routectl check")


# --- explain -------------------------------------------------------------------------------


def _resolve_row(project: Project, row_id: str, category_name: str | None) -> tuple[Any, RowSpec]:
    names = [c.name for c in project.categories]
    qualifier, bare = split_id(row_id, names)
    if category_name is not None:
        category = project.category(category_name)
        if qualifier is not None and qualifier != category.name:
            raise click.UsageError(
                f"{row_id} is qualified by {qualifier}, but -c names {category.name}"
            )
        return category, find_row(category, bare)
    if qualifier is not None:
        category = project.category(qualifier)
        return category, find_row(category, bare)
    holders = [(c, s) for c in project.categories for s in c.rows() if s.id == bare]
    if not holders:
        every = {s.id: c.name for c in project.categories for s in c.rows()}
        close = closest(bare, every, n=3)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise InputError(
            f"unknown row id {shorten(bare)}: no category has it{hint} "
            f"(routectl list --rows shows every id)"
        )
    if len(holders) > 1:
        raise InputError(
            f"row id {shorten(bare)} is in several categories "
            f"({', '.join(c.name for c, _ in holders)}): pass -c CATEGORY or "
            f"qualify it as CATEGORY:{bare}"
        )
    return holders[0]


def explain_document(
    category: Any,
    spec: RowSpec,
    row: dict[str, Any],
    policy: ResolvedPolicy | None,
    *,
    all_policy: bool = False,
) -> dict[str, Any]:
    # By default the sections the row's family reads (a category may not declare them:
    # then every section).
    sections = None if all_policy else getattr(category, "policy_sections", None) or None
    return {
        "category": category.name,
        "id": f"{category.name}:{spec.id}",
        "inputs": {
            "model": spec.model,
            "capability": spec.capability,
            "engine": spec.engine.to_json(),
            "variables": dict(spec.variables),
            "native": {"remove": list(spec.native.remove), "abi": dict(spec.native.abi)},
        },
        "policy": None if policy is None else policy_document(policy, sections),
        "route": row["route"],
        # Whole-model figures a category can derive from a row (e.g. MoE bytes over every
        # MoE layer of the model): None where the category has none.
        "model_totals": (
            category.model_totals(spec, row["route"]) if hasattr(category, "model_totals") else None
        ),
    }


def _count(value: Any) -> str:
    """Byte counts, with thousands separators wherever explain prints them."""
    return (
        f"{value:,}"
        if isinstance(value, int) and not isinstance(value, bool)
        else json.dumps(value)
    )


def _byte_lines(sizes: Mapping[str, Any], prefix: str = "") -> list[str]:
    lines: list[str] = []
    for name, size in sizes.items():
        if isinstance(size, Mapping):
            lines.extend(_byte_lines(size, f"{prefix}{name} "))
        else:
            lines.append(f"  {prefix}{name}: {_count(size)}")
    return lines


def _no_dispatch_reason(
    route: Mapping[str, Any], error: Mapping[str, Any] | None, status: Mapping[str, Any] | None
) -> str:
    """Why a row recorded no native call."""
    if error is not None:
        return "the layer fails closed at load: nothing is prepared or dispatched"
    if status is not None and not route.get("kernel"):
        return f"no kernel serves this row ({status['message']})"
    kernel = route.get("kernel")
    if kernel:
        return f"{kernel} makes no call to a catalogued native op at the replayed token counts"
    return "no kernel was chosen"


def _plan_text(call: Mapping[str, Any]) -> str:
    plan = call.get("plan", {})
    return "  ".join([str(call.get("op")), *(f"{k}={json.dumps(v)}" for k, v in plan.items())])


def _verdict_lines(verdicts: Sequence[Mapping[str, Any]], kernel: Any) -> list[str]:
    if not verdicts:
        return ["candidates: none"]
    width = max(len(str(v["name"])) for v in verdicts)
    lines = ["candidates (priority order):"]
    for v in verdicts:
        if not v["ok"]:
            state_text = f"rejected  [{v['code']}] {v['message']}"
        elif v["name"] == kernel:
            state_text = "chosen"
        else:
            state_text = "ok, not needed" if v["not_needed"] else "ok"
        lines.append(f"  {v['name']:<{width}}  {state_text}")
    return lines


def _check_text(check: Mapping[str, Any], yes: str, no: str) -> str:
    return yes if check["ok"] else f"{no} [{check['code']}] {check['message']}"


def _policy_route_lines(route: dict[str, Any]) -> list[str]:
    """A policy row's qualification, section values, guards, layout and warning codes
    (popped from `route`)."""
    lines: list[str] = []
    if "qualification" in route:
        lines.append(f"qualification: {_check_text(route.pop('qualification'), 'yes', 'no')}")
    if isinstance(route.get("policy"), dict):
        values = route.pop("policy")
        lines.append("row policy (value, source):")
        width = max((len(k) for k in values), default=0)
        lines.extend(
            f"  {k:<{width}} = {json.dumps(v['value'])}  ({v['source']})" for k, v in values.items()
        )
    if "gdn_admission" in route:
        guards = route.pop("gdn_admission")
        lines.append("guards:")
        width = max((len(g["name"]) for g in guards), default=0)
        lines.extend(
            f"  {g['name']:<{width}}  {_check_text(g, 'admitted', 'refused')}" for g in guards
        )
    if "gdn_layout" in route:
        layout = route.pop("gdn_layout")
        lines.append("GDN layout: " + " ".join(f"{k}={v}" for k, v in layout.items()))
    if isinstance(route.get("warnings"), list):
        codes = route.pop("warnings")
        lines.append(
            "warnings: " + (", ".join(f"{w['variable']} ({w['kind']})" for w in codes) or "none")
        )
    return lines


def explain_text(document: Mapping[str, Any]) -> str:
    inputs = document["inputs"]
    engine = inputs["engine"]
    lines = [
        f"row {document['id']}",
        f"model {inputs['model']}, capability {inputs['capability']}",
        "engine " + " ".join(f"{k}={json.dumps(v)}" for k, v in engine.items()),
    ]
    if inputs["variables"]:
        lines.append("variables " + " ".join(f"{k}={v}" for k, v in inputs["variables"].items()))
    native = inputs["native"]
    if native["remove"] or native["abi"]:
        abi = ", ".join(f"{op}={rev}" for op, rev in native["abi"].items()) or "default"
        lines.append(
            f"native build: removed {', '.join(native['remove']) or 'none'}; ABI revisions {abi}"
        )
    policy = document["policy"]
    if policy is not None:
        scope = (
            "every section"
            if policy["sections"] is None
            else f"sections {', '.join(policy['sections'])} and engine-wide; --all-policy "
            f"shows every section"
        )
        lines.append(f"policy (value, source; {scope}):")
        width = max((len(k) for k in policy["values"]), default=0)
        lines.extend(
            f"  {k:<{width}} = {json.dumps(item['value'])}  ({item['source']})"
            for k, item in policy["values"].items()
        )
        lines.extend(f"  warning: {w}" for w in policy["warnings"])
    route = dict(document["route"])
    status = route.pop("status", None)
    error = route.pop("error", None)
    no_dispatch = _no_dispatch_reason(route, error, status)
    if error is not None:
        lines.append(f"error [{error['code']}] {error['message']}")
    if "verdicts" in route:
        lines.extend(_verdict_lines(route.pop("verdicts"), route.get("kernel")))
    if "kernel" in route:
        lines.append(f"kernel: {route.pop('kernel') or 'none'}")
    if status is not None:
        lines.append(f"status [{status['code']}] {status['message']}")
    if "prepared_layout" in route:
        lines.append(f"prepared layout: {route.pop('prepared_layout') or 'none'}")
    for key in ("capability", "fallback"):
        if key in route:
            lines.append(f"{key}: {json.dumps(route.pop(key))}")
    if "flags" in route:
        flags = route.pop("flags")
        lines.append(
            "flags: " + (", ".join(f"{k}={json.dumps(v)}" for k, v in flags.items()) or "none")
        )
    if "fallbacks" in route:
        fallbacks = route.pop("fallbacks")
        lines.append("fallbacks:" + ("" if fallbacks else " none"))
        lines.extend(
            f"  {f['field']}: requested {json.dumps(f['requested'])}, effective "
            f"{json.dumps(f['effective'])} ({f['reason']})"
            for f in fallbacks
        )
    if "bytes" in route:
        sizes = dict(route.pop("bytes"))
        lines.append(f"bytes: total {_count(sizes.pop('total', '?'))}")
        lines.extend(
            _byte_lines({"tensor": sizes.pop("tensors", {}), "scratch": sizes.pop("scratch", {})})
        )
        lines.extend(_byte_lines(sizes))
    for key in ("prepare", "dispatch"):
        calls = route.pop(key, [])
        if calls:
            lines.append(f"{key}:")
            lines.extend(f"  {_plan_text(call)}" for call in calls)
        elif key == "dispatch":
            lines.append(f"dispatch: none ({no_dispatch})")
        else:
            lines.append("prepare: none")
    if "stages" in route:
        lines.append("stages per token count:")
        for entry in route.pop("stages"):
            lines.append(f"  M={entry['m']}: {' > '.join(entry['chosen'])}")
            lines.extend(
                f"    refused {v['name']} [{v['code']}] {v['message']}" for v in entry["rejected"]
            )
    lines.extend(_policy_route_lines(route))
    # Route keys this renderer does not know (new families) still show.
    lines.extend(f"{k}: {json.dumps(v, sort_keys=True)}" for k, v in route.items())
    totals = document.get("model_totals")
    if totals:
        rest = {k: v for k, v in totals.items() if k != "layers"}
        lines.append(
            f"model totals per rank over {totals['layers']} layers: "
            + ", ".join(f"{k} {v:,}" for k, v in rest.items())
        )
    return "\n".join(lines) + "\n"


@cli.command("explain")
@click.argument("row_id", shell_complete=complete_row_id)
@click.option(
    "-c",
    "--category",
    "category_name",
    default=None,
    help="The category of a bare row id held by several categories.",
    shell_complete=complete_category,
)
@click.option(
    "--all-policy",
    is_flag=True,
    help="Show every policy section, not only those the row's family reads.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@project_option
@click.pass_context
def explain_command(
    ctx: click.Context,
    row_id: str,
    category_name: str | None,
    all_policy: bool,
    fmt: str,
    project_dir: Path | None,
) -> None:
    """Show why one row routes where it does.

    Its policy with sources, every candidate's verdict, the kernel, prepared layout, bytes,
    fallbacks and the dispatch plan.

    ROW_ID may be qualified (CATEGORY:ROW-ID).
    """
    project = state(ctx).project(project_dir)
    category, spec = _resolve_row(project, row_id, category_name)
    row, policy = replay_row(project, category, spec)
    document = explain_document(category, spec, plain_rows([row])[0], policy, all_policy=all_policy)
    if fmt == "json":
        click.echo(dump_json(document), nl=False)
    else:
        click.echo(explain_text(document), nl=False)
