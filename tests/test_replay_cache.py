"""The replay cache (`routectl.review.cache`, docs/cache.md): every command's output is the
same with and without it, each kind of input changes the key, an unreadable entry is
ignored with one warning and rebuilt, and a run whose every category hits imports no torch."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from routectl.category import Category
from routectl.project import load_project
from routectl.review.cache import (
    CACHE_DIR_NAME,
    NO_CACHE_VARIABLE,
    KeyInputs,
    ReplayCache,
    category_key,
    dependency_versions,
    resolved_sources,
    source_files,
)
from routectl.review.closure import WALK_DEPTH, _Sources, _walk
from routectl.rows import RowSpec
from tests.fixtures.toy import Result, invoke, make_project, ok, tree_bytes
from tests.project_files import git_environ

ROOT = Path(__file__).resolve().parents[1]
MODULE = Path("toyproj") / "__init__.py"
NO_CACHE = {NO_CACHE_VARIABLE: "1"}


def git(repo: Path, *args: str) -> None:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=git_environ(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def commit_all(repo: Path, tag: str) -> None:
    git(repo, "add", "-A")
    ident = ["-c", "user.email=tests@routectl.invalid", "-c", "user.name=routectl tests"]
    git(repo, *ident, "commit", "-q", "-m", tag)
    git(repo, "tag", tag)


def cache_of(project: Path) -> Path:
    return project / CACHE_DIR_NAME


def row_entries(project: Path) -> list[Path]:
    return sorted(cache_of(project).glob("rows/*/*.rows"))


def run(project: Path, args: list[object], environ: dict[str, str] | None = None) -> Result:
    return ok(invoke(args, cwd=project, environ={**git_environ(), **(environ or {})}))


def outcome(result: Result, out: Path | None = None) -> tuple[object, ...]:
    """What a user sees of a run: exit code, stdout, stderr and the files it wrote."""
    files = tree_bytes(out) if out is not None and out.exists() else {}
    return result.code, result.stdout, result.stderr, files


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The toy project in a git repository: `base` as made, `changed` with the fast toy
    kernel off for fp8 KV below SM75 (a failing check with changes to show)."""
    project = make_project(tmp_path)
    git(project, "init", "-q", "-b", "main")
    (project / ".gitignore").write_text("__pycache__/\n")
    commit_all(project, "base")
    module = project / MODULE
    fast = 'fast = bool(ctx.policy.value("toy.fast"))'
    slow_fp8 = ' and not (ctx.hardware.capability < 75 and ctx.row.engine.kv_dtype == "fp8_e4m3")'
    module.write_text(module.read_text().replace(fast, fast + slow_fp8))
    commit_all(project, "changed")
    return project


def commands(project: Path, out: Path) -> dict[str, list[object]]:
    """Every command that replays, as a user runs it (the check fails: rows moved)."""
    return {
        "check": ["check"],
        "check json": ["check", "--format", "json", "-c", "toy-a"],
        "check expected": ["check", "--write-expected", out / "expected.json"],
        "snapshot": ["snapshot", "--all", "--output-dir", out / "snapshots"],
        "snapshot stdout": ["snapshot", "-c", "toy-b", "-o", "-"],
        "diff ref": ["diff", "--baseline-ref", "base"],
        "diff ref json": ["diff", "--baseline-ref", "base", "--format", "json"],
        "diff files": ["diff", "--baseline", project / "snapshots"],
    }


def test_every_command_says_the_same_with_and_without_the_cache(repo: Path, tmp_path: Path):
    """Without the cache, with a cold one and with a warm one (every category and the
    baseline served from it): the same exit code, stdout, stderr and files, byte for byte."""
    results: dict[str, list[tuple[object, ...]]] = {}
    out = tmp_path / "out"
    shutil.rmtree(cache_of(repo))
    for mode, environ in (("off", NO_CACHE), ("cold", {}), ("warm", {})):
        for name, args in commands(repo, out).items():
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            results.setdefault(name, []).append(outcome(run(repo, args, environ), out))
            assert cache_of(repo).exists() == (mode != "off")
    for name, (off, cold, warm) in results.items():
        assert off[0] in (0, 1), (name, off)
        assert cold == off, name
        assert warm == off, name
    assert results["check"][0][0] == 1  # a failing check: its changes were shown each time


def test_check_update_writes_the_same_files_with_and_without_the_cache(repo: Path):
    retained = {}
    for environ in (NO_CACHE, {}, {}):
        git(repo, "checkout", "-q", "--", "snapshots")
        result = run(repo, ["check", "--update", "--accept-all"], environ)
        assert result.code == 0, result.stderr
        retained[len(retained)] = (result.stdout, result.stderr, tree_bytes(repo / "snapshots"))
    assert retained[0] == retained[1] == retained[2]
    # The updated snapshots are not an input: the next check is served from the cache.
    again = run(repo, ["check", "-v"])
    assert again.code == 0
    assert "replayed: none; from the replay cache: 2 categories" in again.stderr


def test_a_warm_cache_replays_nothing_and_the_baseline_is_not_rebuilt(repo: Path):
    first = run(repo, ["diff", "--baseline-ref", "base", "-v"])
    assert "replayed: toy-a, toy-b;" in first.stderr
    assert "baseline computed" in first.stderr
    second = run(repo, ["diff", "--baseline-ref", "base", "-v"])
    assert "replayed: none; from the replay cache: 2 categories" in second.stderr
    assert "baseline from the replay cache" in second.stderr
    assert second.stdout == first.stdout and second.code == first.code == 1


def test_off_by_flag_or_variable(repo: Path):
    for args, environ in ((["check", "--no-cache", "-v"], {}), (["check", "-v"], NO_CACHE)):
        shutil.rmtree(cache_of(repo), ignore_errors=True)
        result = run(repo, args, environ)
        assert "replayed every category (replay cache off)" in result.stderr
        assert not cache_of(repo).exists()
    # "0" and empty leave it on.
    for value in ("0", ""):
        result = run(repo, ["check", "-v"], {NO_CACHE_VARIABLE: value})
        assert "from the replay cache" in result.stderr


def test_the_folder_ignores_itself(repo: Path):
    run(repo, ["check"])
    assert (cache_of(repo) / ".gitignore").read_text().splitlines()[-1] == "*"
    done = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "--ignored", "--", CACHE_DIR_NAME],
        env=git_environ(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.splitlines() == [f"!! {CACHE_DIR_NAME}/"]


@pytest.mark.parametrize("damage", ["flip", "truncate", "header", "empty"])
def test_an_unreadable_entry_is_ignored_with_one_warning_and_rebuilt(repo: Path, damage: str):
    shutil.rmtree(cache_of(repo))  # the fixture's run at `base` left entries of its own
    clean = run(repo, ["check"])
    entry = row_entries(repo)[0]
    assert len(row_entries(repo)) == 2  # one per category, each read by the next run
    data = bytearray(entry.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x01
    elif damage == "truncate":
        del data[len(data) - 10 :]
    elif damage == "header":
        data[:5] = b"xxxxx"
    else:
        data = bytearray()
    entry.write_bytes(bytes(data))
    damaged = run(repo, ["check"])
    warnings = [line for line in damaged.lines if "replay cache" in line]
    assert len(warnings) == 1 and str(entry) in warnings[0], damaged.stderr
    assert [line for line in damaged.lines if line not in warnings] == clean.lines
    assert damaged.stdout == clean.stdout and damaged.code == clean.code
    rebuilt = run(repo, ["check", "-v"])
    assert "replayed: none" in rebuilt.stderr and "warning" not in rebuilt.stderr


def test_a_damaged_cached_baseline_is_rebuilt(repo: Path):
    clean = run(repo, ["diff", "--baseline-ref", "base"])
    (cached,) = [p for p in (cache_of(repo) / "baselines").iterdir()]
    target = cached / "toy-a.json"
    target.write_text(target.read_text().replace('"tp": 1', '"tp": 7', 1))
    damaged = run(repo, ["diff", "--baseline-ref", "base", "-v"])
    assert any("unreadable cached baseline" in line for line in damaged.lines)
    assert "baseline computed" in damaged.stderr
    assert damaged.stdout == clean.stdout
    again = run(repo, ["diff", "--baseline-ref", "base", "-v"])
    assert "baseline from the replay cache" in again.stderr


def test_an_unwritable_cache_warns_once_and_changes_nothing(repo: Path):
    clean = run(repo, ["check"], NO_CACHE)
    shutil.rmtree(cache_of(repo))
    cache_of(repo).write_text("a file where the folder would be\n")
    result = run(repo, ["check"])
    warnings = [line for line in result.lines if "cannot write the replay cache" in line]
    assert len(warnings) == 1
    assert result.stdout == clean.stdout and result.code == clean.code


# --- what the key covers --------------------------------------------------------------------


def replayed(project: Path) -> str:
    line = next(x for x in run(project, ["check", "-v"]).lines if x.startswith("replayed"))
    return line.split(";")[0]


@pytest.mark.parametrize(
    "path",
    [MODULE, Path("toyproj") / "helper.py", Path("pyproject.toml"), Path("tests") / "data.json"],
)
def test_one_byte_of_a_project_source_replays(repo: Path, path: Path):
    """The toy project has no family records: every project source is keyed, and one byte
    added to any replays every category."""
    target = repo / path
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("# x\n" if path.suffix == ".py" else '{"x": 1}\n')
    run(repo, ["check"])
    assert replayed(repo) == "replayed: none"
    target.write_bytes(target.read_bytes() + b"\n")  # one byte more, still valid
    assert replayed(repo) == "replayed: toy-a, toy-b"
    assert replayed(repo) == "replayed: none"


def test_the_snapshots_and_untracked_bytecode_are_not_inputs(repo: Path):
    run(repo, ["check"])
    retained = repo / "snapshots" / "toy-a.json"
    retained.write_text(retained.read_text().replace('"tp": 1', '"tp": 5', 1))
    (repo / "toyproj" / "__pycache__").mkdir(exist_ok=True)
    (repo / "toyproj" / "__pycache__" / "x.py").write_text("# bytecode folder\n")
    assert replayed(repo) == "replayed: none"


def test_each_kind_of_input_changes_the_key(tmp_path: Path):
    """The routectl sources, each version (routectl, Python, torch, orjson, pydantic), the
    category's rows and its basis: one byte of any changes its key."""
    project_dir = make_project(tmp_path, snapshot=False)
    package = tmp_path / "routectl"
    shutil.copytree(ROOT / "routectl", package, ignore=shutil.ignore_patterns("__pycache__"))
    project = load_project(project_dir)
    category = project.categories[0]
    versions = dependency_versions()
    assert [name for name, _ in versions] == [
        "routectl",
        "python",
        "torch",
        "orjson",
        "pydantic",
        "pydantic-core",
    ]

    def key(**changes: object) -> str:
        inputs = KeyInputs(given_versions=changes.get("versions", versions), package=package)
        return category_key(project, changes.get("category", category), inputs)

    base = key()
    assert key() == base  # deterministic
    for i, (name, value) in enumerate(versions):
        changed = list(versions)
        changed[i] = (name, value + "x")
        assert key(versions=tuple(changed)) != base, name
    harness = package / "replay" / "harness.py"
    harness.write_bytes(harness.read_bytes() + b" ")
    assert key() != base
    harness.write_bytes(harness.read_bytes()[:-1])
    assert key() == base
    schema = package / "schemas" / "snapshot.schema.json"
    schema.write_bytes(schema.read_bytes() + b" ")
    assert key() != base
    schema.write_bytes(schema.read_bytes()[:-1])

    rows = list(category.rows())

    @dataclasses.dataclass(frozen=True)
    class Edited:
        name: str
        basis: str
        edited: list

        def rows(self) -> list:
            return self.edited

    assert key(category=Edited(category.name, category.basis, rows)) == base
    one = dataclasses.replace(rows[0], capability=rows[0].capability + 1)
    assert key(category=Edited(category.name, category.basis, [one, *rows[1:]])) != base
    assert key(category=Edited(category.name, category.basis + ".", rows)) != base
    assert key(category=Edited(category.name + "x", category.basis, rows)) != base
    other = project.categories[1]
    assert key(category=other) != base


# --- no torch on a hit ----------------------------------------------------------------------

PROBE = """
import os, sys
from routectl.cli import run
code = run(sys.argv[1:], os.environ)
print("torch" in sys.modules, code, file=sys.stderr)
"""


def torch_imported(project: Path, args: list[str]) -> tuple[bool, int, str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=project,
        env={**git_environ(), "PYTHONPATH": os.pathsep.join([str(project), str(ROOT)])},
        capture_output=True,
        text=True,
        check=False,
    )
    imported, code = done.stderr.splitlines()[-1].split()
    return imported == "True", int(code), done.stderr


def real_project(tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    project.mkdir()
    for name in ("policies", "native", "snapshots"):
        shutil.copytree(ROOT / name, project / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")
    return project


def test_a_check_of_the_real_project_served_from_the_cache_never_imports_torch(tmp_path: Path):
    """The shipped categories: the first check replays (and imports torch); the second
    finds every category in the cache, reads and compares the retained rows as always, and
    torch is absent from sys.modules when it exits."""
    project = real_project(tmp_path)
    first = torch_imported(project, ["check", "-v"])
    assert first[:2] == (True, 0), first[2]
    second = torch_imported(project, ["check", "-v"])
    assert second[:2] == (False, 0), second[2]
    shipped = len(list((ROOT / "snapshots").glob("*.json")))  # one retained file a category
    assert f"replayed: none; from the replay cache: {shipped} categories" in second[2]
    # The first check parsed every retained file and found it holds the rows it replayed:
    # the second took them from the cache entries instead of parsing the 18 MB again.
    assert f"snapshot files known to hold those rows: {shipped}" in second[2]
    # A changed retained row is still found: the cached rows are compared as replayed ones.
    retained = project / "snapshots" / "sm75-linear.json"
    retained.write_text(retained.read_text().replace('"capability": 75', '"capability": 76', 1))
    third = torch_imported(project, ["check", "-c", "sm75-linear", "-q"])
    assert third[:2] == (False, 1), third[2]


def replayed_line(project: Path, args: tuple[str, ...] = ()) -> str:
    found = torch_imported(project, ["check", "-v", *args])
    assert found[1] == 0, found[2]
    return next(x for x in found[2].splitlines() if x.startswith("replayed"))


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def test_a_module_one_category_imports_replays_that_category_and_a_shared_one_all(
    tmp_path: Path,
):
    """The real project's keys follow each category's import closure: one byte of the MoE
    admission module replays the MoE category alone, a module no replay imports (a test
    helper) none, the variable table (which every replay goes through) every category."""
    project = real_project(tmp_path)
    replayed_line(project)
    append(project / "policies" / "awq_moe_admission.py", "\n")
    others = len(load_project(ROOT).categories) - 1
    assert replayed_line(project) == (
        f"replayed: sm70-awq-moe; from the replay cache: {others} categories"
    )
    (project / "policies" / "unused_helper.py").write_text("VALUE = 1\n")
    assert replayed_line(project).startswith("replayed: none;")
    append(project / "policies" / "variables.py", "\n")
    every = ", ".join(c.name for c in load_project(ROOT).categories)
    assert replayed_line(project) == f"replayed: {every}; from the replay cache: 0 categories"


def test_a_computed_import_keys_the_category_by_every_source(tmp_path: Path):
    """A module of the Turing category that imports by a computed name could run any module:
    that category is keyed by every project source again, the others keep their closures."""
    project = real_project(tmp_path)
    append(
        project / "policies" / "categories" / "sm75.py",
        "\n\ndef _plugin(name: str) -> object:\n"
        "    import importlib\n\n    return importlib.import_module(name)\n",
    )
    replayed_line(project, ("-c", "sm75-linear", "-c", "sm70-nvfp4-linear"))
    (project / "policies" / "unused_helper.py").write_text("VALUE = 1\n")
    assert replayed_line(project, ("-c", "sm75-linear", "-c", "sm70-nvfp4-linear")) == (
        "replayed: sm75-linear; from the replay cache: 1 categories"
    )


def test_keys_computed_beside_the_replay_are_the_keys_a_lookup_computes(tmp_path: Path):
    """An empty cache needs no key to miss; the keys computed in a forked process while the
    replay runs are those a later lookup computes here, so the next run hits."""
    project = load_project(make_project(tmp_path))
    categories = list(project.categories)
    cache = ReplayCache(tmp_path / CACHE_DIR_NAME, pytest.fail)
    found, missing = cache.rows(project, categories)
    assert found == {} and missing == categories
    assert all(cache.inputs.key_of(project, c) is None for c in categories)
    with cache.keying(project, missing, background=True):
        assert all(cache.inputs.key_of(project, c) is None for c in categories)
    expected = {c.name: category_key(project, c, KeyInputs()) for c in categories}
    assert {c.name: cache.inputs.key_of(project, c) for c in categories} == expected
    for category in categories:
        cache.store_rows(project, category, [("row", "{}")])
    again = ReplayCache(tmp_path / CACHE_DIR_NAME, pytest.fail)
    found, missing = again.rows(project, categories)
    assert missing == [] and found == {c.name: [("row", "{}")] for c in categories}


@dataclasses.dataclass(frozen=True)
class RecordingCategory(Category):
    """A category whose `rows()` appends the id of the process it runs in to `log`."""

    log: Path
    name: str = "recording"
    basis: str = "records where its rows are asked for"

    def rows(self) -> Sequence[RowSpec]:
        with self.log.open("a") as out:
            out.write(f"{os.getpid()}\n")
        return ()


def test_the_key_process_runs_no_project_code(tmp_path: Path):
    """The forked key process reads files and walks objects only: a category's `rows()`
    runs in this process (the one `diff` stops and reaps as its baseline), and the keys
    are still those a lookup computes."""
    log = tmp_path / "rows-called-in"
    toy = load_project(make_project(tmp_path / "toy"))
    project = toy.with_categories((RecordingCategory(log),))
    categories = list(project.categories)
    cache = ReplayCache(tmp_path / CACHE_DIR_NAME, pytest.fail)
    with cache.keying(project, categories, background=True):
        pass
    assert set(log.read_text().split()) == {str(os.getpid())}
    expected = {c.name: category_key(project, c, KeyInputs()) for c in categories}
    assert {c.name: cache.inputs.key_of(project, c) for c in categories} == expected
    assert "recording" in expected


def test_keys_without_background_are_computed_before_the_block(tmp_path: Path):
    project = load_project(make_project(tmp_path))
    categories = list(project.categories)
    cache = ReplayCache(tmp_path / CACHE_DIR_NAME, pytest.fail)
    with cache.keying(project, categories, background=False):
        keys = {c.name: cache.inputs.key_of(project, c) for c in categories}
    assert keys == {c.name: category_key(project, c, KeyInputs()) for c in categories}


def test_a_failing_replay_stops_the_key_process(tmp_path: Path):
    project = load_project(make_project(tmp_path))
    cache = ReplayCache(tmp_path / CACHE_DIR_NAME, pytest.fail)
    with pytest.raises(RuntimeError, match="replay failed"):
        with cache.keying(project, list(project.categories), background=True):
            raise RuntimeError("replay failed")
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # no child left running or unreaped


def test_the_closure_walk_reaches_each_object_at_its_least_depth():
    """A module named one step below an object that a long path reaches at the depth limit,
    and a short path at depth 1, is found, whichever path is taken first."""
    target = ["pkg.target"]
    chain: list[object] = [target]
    for _ in range(WALK_DEPTH - 2):
        chain = [chain]
    found: set[str] = set()
    _walk([target, chain], found, {"pkg.target", "pkg.other"})
    assert found == {"pkg.target"}
    found = set()
    _walk([chain, target], found, {"pkg.target"})
    assert found == {"pkg.target"}


@pytest.mark.parametrize(
    ("source", "dynamic"),
    [
        ("evaluated = executor = 1  # an evaluation\n", False),
        ("def f(x):\n    return eval(x)\n", True),
        ("import importlib\nm = importlib.import_module('a')\n", True),
        ("from importlib import import_module as load\n", True),
        ("'''eval it'''\nVALUE = 1\n", False),
    ],
)
def test_a_module_imports_by_a_computed_name_only_when_it_uses_one(
    tmp_path: Path, source: str, dynamic: bool
):
    path = tmp_path / "mod.py"
    path.write_text(source)
    assert _Sources({"mod": path}).dynamic("mod") is dynamic


# --- retained files known to hold a cache entry's rows ---------------------------------------


def memos(project: Path) -> list[Path]:
    return sorted(cache_of(project).glob("retained/*/*.json"))


def matched(result: Result) -> int:
    """How many snapshot files `-v` says a memo matched (their parse spared)."""
    line = next(x for x in result.lines if x.startswith("replayed"))
    marker = "snapshot files known to hold those rows: "
    return int(line.split(marker)[1].split(";")[0]) if marker in line else 0


@pytest.fixture
def clean(repo: Path) -> Path:
    """The toy project at `base`: its retained files hold exactly what it replays."""
    git(repo, "checkout", "-q", "base")
    shutil.rmtree(cache_of(repo), ignore_errors=True)
    return repo


def unchanged_commands(project: Path, out: Path) -> dict[str, list[object]]:
    return {
        "check": ["check"],
        "check json": ["check", "--format", "json"],
        "check one": ["check", "-c", "toy-b"],
        "check expected": ["check", "--write-expected", out / "expected.json"],
        "diff files": ["diff", "--baseline", project / "snapshots"],
        "diff files json": ["diff", "--baseline", project / "snapshots", "--format", "json"],
    }


def test_a_file_that_holds_the_cached_rows_is_not_parsed_again_and_says_the_same(
    clean: Path, tmp_path: Path
):
    """The first run with the cache parses each retained file and notes that it holds the
    rows stored; later runs take the rows from the entries. Every command says the same
    with the cache off, on a cold cache, and with the files matched by their memos."""
    out = tmp_path / "out"
    results: dict[str, list[tuple[object, ...]]] = {}
    for environ in (NO_CACHE, {}, {}, {}):
        for name, args in unchanged_commands(clean, out).items():
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            results.setdefault(name, []).append(outcome(run(clean, args, environ), out))
    for name, (off, *cached) in results.items():
        assert off[0] == 0, (name, off)
        assert all(c == off for c in cached), name
    # Two a category: the same file read as retained (check) and as a baseline (diff).
    assert len(memos(clean)) == 4
    assert matched(run(clean, ["check", "-v"])) == 2
    assert matched(run(clean, ["check", "-v", "-c", "toy-a"])) == 1


def test_a_cold_run_notes_the_files_and_the_second_run_matches_them(clean: Path):
    first = run(clean, ["check", "-v"])
    assert "replayed: toy-a, toy-b;" in first.stderr and matched(first) == 0
    assert len(memos(clean)) == 2
    second = run(clean, ["check", "-v"])
    assert "replayed: none;" in second.stderr and matched(second) == 2
    assert second.stdout == first.stdout


def _edit_value(text: str) -> str:
    return text.replace('"tp": 1', '"tp": 5', 1)


def _edit_layout(text: str) -> str:
    return json.dumps(json.loads(text), indent=4, sort_keys=True) + "\n"


def _edit_schema(text: str) -> str:
    document = json.loads(text)
    document["rows"][0]["route"] = "not a route"
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def _edit_json(text: str) -> str:
    return text[: len(text) // 2]


def _edit_bom(text: str) -> str:
    return "\ufeff" + text


@pytest.mark.parametrize(
    "edit",
    [_edit_value, _edit_layout, _edit_schema, _edit_json, _edit_bom],
    ids=["a value", "the layout", "a schema violation", "cut short", "a byte order mark"],
)
def test_a_file_edited_after_its_memo_is_read_in_full(clean: Path, edit: Any):
    """A memo names the file's exact bytes: after any edit (one that moves a row, one that
    only reformats, one that makes it invalid or unreadable) the file is read and judged as
    without the cache, errors and all."""
    run(clean, ["check"])
    assert matched(run(clean, ["check", "-v"])) == 2
    retained = clean / "snapshots" / "toy-a.json"
    retained.write_text(edit(retained.read_text()), encoding="utf-8")
    off = run(clean, ["check"], NO_CACHE)
    on = run(clean, ["check"])
    assert (on.code, on.stdout, on.stderr) == (off.code, off.stdout, off.stderr)
    verbose = run(clean, ["check", "-v"])
    assert (verbose.code, verbose.stdout) == (off.code, off.stdout)
    if off.code != 2:  # read in full, and noted again if it holds the rows (the layout)
        assert matched(verbose) == 1 + (edit is _edit_layout)


def test_a_file_over_the_size_limit_is_refused_alike_with_a_memo(clean: Path):
    """The digest thread reads under the run's limit too (a thread does not inherit the
    caller's context): a memo never lets a file past the limit the reader enforces."""
    run(clean, ["check"])
    assert matched(run(clean, ["check", "-v"])) == 2
    small = {"ROUTECTL_MAX_INPUT_BYTES": "200"}
    off = run(clean, ["check"], {**NO_CACHE, **small})
    on = run(clean, ["check"], small)
    assert off.code == 2 and "toy-a.json" in off.stderr, off.stderr
    assert (on.code, on.stdout, on.stderr) == (off.code, off.stdout, off.stderr)


@pytest.mark.parametrize("damage", ["garbage", "another entry", "another basis", "no basis"])
def test_a_memo_that_does_not_fit_is_ignored(clean: Path, damage: str):
    """A memo that cannot be read, or names another entry, or carries no basis: the file
    is parsed as always (the basis a memo carries is the one the output shows)."""
    expected = run(clean, ["check", "--format", "json"], NO_CACHE)
    run(clean, ["check"])
    for memo in memos(clean):
        document = json.loads(memo.read_text())
        if damage == "garbage":
            memo.write_bytes(b"\x00{not json")
            continue
        if damage == "another entry":
            document["rows"] = "0" * len(document["rows"])
        elif damage == "another basis":
            document["basis"] = 7
        else:
            del document["basis"]
        memo.write_text(json.dumps(document))
    result = run(clean, ["check", "--format", "json", "-v"])
    assert matched(result) == 0
    assert (result.code, result.stdout) == (expected.code, expected.stdout)
    assert "warning" not in result.stderr


def test_a_memo_holds_the_basis_the_file_declares(clean: Path):
    """The basis shown for a matched file is the one its memo recorded from the file."""
    run(clean, ["check"])
    retained = json.loads((clean / "snapshots" / "toy-a.json").read_text())
    (memo,) = [m for m in memos(clean) if m.parent.name == "toy-a"]
    assert json.loads(memo.read_text())["basis"] == retained["basis"]
    entry = next(p for p in row_entries(clean) if p.parent.name == "toy-a")
    header = entry.read_bytes().split(b"\n", 1)[0].split(b" ")
    assert json.loads(memo.read_text())["rows"] == header[3].decode()


def test_the_memo_is_named_by_every_source(clean: Path):
    """A memo is named by every project and routectl source: after one byte of a project
    source (every category replayed) the old memo names no file read with the new sources."""
    run(clean, ["check"])
    before = set(memos(clean))
    assert len(before) == 2
    helper = clean / "toyproj" / "helper.py"
    helper.write_text("# one more source\n")
    result = run(clean, ["check", "-v"])
    assert "replayed: toy-a, toy-b;" in result.stderr and matched(result) == 0
    assert len(set(memos(clean)) - before) == 2


def test_resolved_sources_are_the_source_files_resolved(tmp_path: Path):
    """The walk that resolves folders once finds the files `source_files` finds, each
    resolved as `Path.resolve` resolves it: links to files followed to their targets, links
    to folders not entered, hidden, bytecode, virtual-environment and excluded folders
    skipped, other suffixes left out."""
    root = tmp_path / "tree"
    outside = tmp_path / "outside"
    for folder in ("pkg/sub", ".hidden", "pkg/__pycache__", "venv", "snapshots", "data"):
        (root / folder).mkdir(parents=True)
    outside.mkdir()
    for name in ("pkg/a.py", "pkg/sub/b.pyi", "pkg/c.txt", ".hidden/d.py", "venv/e.py"):
        (root / name).write_text("x = 1\n")
    (root / "venv" / "pyvenv.cfg").write_text("home = /\n")
    (root / "pkg" / "__pycache__" / "f.py").write_text("")
    (root / "snapshots" / "g.json").write_text("{}\n")
    (root / "data" / "h.toml").write_text("")
    (outside / "linked.py").write_text("y = 2\n")
    (outside / "inner").mkdir()
    (outside / "inner" / "i.py").write_text("")
    (root / "pkg" / "link.py").symlink_to(outside / "linked.py")
    (root / "pkg" / "folder_link").symlink_to(outside / "inner", target_is_directory=True)
    (root / "data_link").symlink_to(root / "data", target_is_directory=True)
    exclude = [root / "snapshots"]
    expected = sorted({p.resolve() for p in source_files(root, exclude=exclude)})
    assert sorted(resolved_sources(root, exclude=exclude)) == expected
    assert outside / "linked.py" in expected
    assert sorted(p.name for p in expected) == ["a.py", "b.pyi", "h.toml", "linked.py"]
    # Through a linked root, too: every path is the resolved one.
    linked_root = tmp_path / "root_link"
    linked_root.symlink_to(root, target_is_directory=True)
    assert sorted(resolved_sources(linked_root, exclude=exclude)) == expected
