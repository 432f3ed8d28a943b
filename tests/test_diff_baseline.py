"""`routectl diff`: baselines computed at a git ref (a throwaway repository holding a copy of
the toy project at several commits) and pre-built baselines (`--baseline PATH`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from routectl.errors import InputError, RoutectlError
from routectl.io.schemas import schema_violation
from routectl.review.baseline import ENGINE_PATH, TEMP_PREFIX
from routectl.review.sources import read_baseline_snapshot
from tests.fixtures.toy import TEMPLATE, invoke, load, make_project, ok, save, tree_bytes
from tests.project_files import git, git_environ

ROOT = Path(__file__).resolve().parents[1]
PROJECT_PATH = Path("tools") / "toy"  # the project is not at the repository root
# The rows a capability condition (no fast kernel for fp8 KV below SM75) moves: toy-a is SM70,
# toy-b SM75; probes and the not-applicable row use float16.
AFFECTED = sorted(
    f"toy-a:toy_model/fp8_e4m3/tp{tp}/none/c1/q{q}" for tp in (1, 2) for q in (64, 4096)
)
FAST = 'fast = bool(ctx.policy.value("toy.fast"))'
FAST_SM75_FP8 = (
    FAST + ' and not (ctx.hardware.capability < 75 and ctx.row.engine.kv_dtype == "fp8_e4m3")'
)
META_CLASS = re.compile(
    r'@dataclass\(frozen=True\)\nclass Meta:\n.*?dtype: str = "float16"\n', re.DOTALL
)
ROWS_DEF = "    def rows(self) -> Sequence[RowSpec]:\n"
SLOW_ROWS = ROWS_DEF + (
    "        import os, pathlib, time\n"
    "        pathlib.Path('baseline-started').write_text(str(os.getpid()))\n"
    "        time.sleep(60)\n"
)
# Records, in whichever process imports the toy project, what that process was given.
SPY = """
import json as _json, os as _os, sys as _sys
_os.makedirs({dir!r}, exist_ok=True)
with open(_os.path.join({dir!r}, f"{{_os.getpid()}}.json"), "w") as _f:
    _json.dump({{"environ": dict(_os.environ), "sys_path": _sys.path, "cwd": _os.getcwd(),
                "module": __file__}}, _f)
"""


def commit(repo: Path, message: str, tag: str) -> None:
    git(repo, "add", "-A")
    git(
        repo,
        "-c",
        "user.email=tests@routectl.invalid",
        "-c",
        "user.name=routectl tests",
        "commit",
        "-q",
        "-m",
        message,
    )
    git(repo, "tag", tag)


def edit(path: Path, old: str | re.Pattern[str], new: str) -> None:
    text = path.read_text()
    if isinstance(old, re.Pattern):
        assert old.search(text), f"{old.pattern} not in {path}"
        path.write_text(old.sub(new, text, count=1))
    else:
        assert old in text, f"{old!r} not in {path}"
        path.write_text(text.replace(old, new))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """main: no-project -> base -> changed (one capability condition) -> renamed (code
    renamed and moved only) -> junk (retained snapshots overwritten, a spy added); side
    commits from base: slow, broken-import, broken-runtime, no-table."""
    repo = tmp_path_factory.mktemp("repo")
    git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("a repository that holds a routectl project\n")
    (repo / ".gitignore").write_text("__pycache__/\n")  # but not *.json.new: diff writes none
    commit(repo, "no project yet", "no-project")

    project = repo / PROJECT_PATH
    shutil.copytree(TEMPLATE, project, ignore=shutil.ignore_patterns("__pycache__"))
    module = project / "toyproj" / "__init__.py"
    edit(module, 'unknown_prefix="TOY_",', 'unknown_prefix="TOY_",\n    variable_prefix="TOY_",')
    result = ok(invoke(["snapshot", "--all", "--output-dir", project / "snapshots"], cwd=project))
    assert result.code == 0, result.stderr
    commit(repo, "toy project", "base")

    edit(module, FAST, FAST_SM75_FP8)
    commit(repo, "no fast toy kernel for fp8 KV below SM75", "changed")

    shapes = META_CLASS.search(module.read_text()).group(0)
    (project / "toyproj" / "shapes.py").write_text(
        "from dataclasses import dataclass\n\n\n" + shapes.replace("class Meta", "class Shape")
    )
    edit(module, META_CLASS, "")
    edit(module, "Meta(", "Shape(")
    edit(
        module,
        "from routectl.workload import EngineConfig\n",
        "from routectl.workload import EngineConfig\nfrom toyproj.shapes import Shape\n",
    )
    edit(module, "TOKEN_COUNTS", "REPLAY_TOKENS")
    commit(repo, "rename and move only", "renamed")

    for path in (project / "snapshots").glob("*.json"):
        path.write_text("junk, not a snapshot\n")
    module.write_text(module.read_text() + SPY.format(dir=str(repo.parent / "spy")))
    commit(repo, "junk retained snapshots, and a spy", "junk")

    side = {
        "slow": lambda: edit(module, ROWS_DEF, SLOW_ROWS),
        "broken-import": lambda: edit(
            module,
            "from __future__ import annotations\n",
            "from __future__ import annotations\n\nimport toy_missing_dependency  # noqa: F401\n",
        ),
        "broken-runtime": lambda: module.write_text(
            module.read_text() + "\nraise RuntimeError('toy baseline exploded')\n"
        ),
        "no-table": lambda: edit(project / "pyproject.toml", "[tool.routectl]", "[tool.other]"),
    }
    for tag, change in side.items():
        git(repo, "checkout", "-q", "--detach", "base")
        change()
        commit(repo, tag, tag)
    git(repo, "checkout", "-q", "main")
    return repo


@pytest.fixture
def temp(tmp_path: Path) -> Path:
    """The temp parent the runs use (TMPDIR): empty after every run."""
    path = tmp_path / "tmp"
    path.mkdir()
    return path


def at(repo: Path, tag: str) -> Path:
    """Check the fixture repository out at `tag`; the project folder."""
    git(repo, "checkout", "-q", "--detach", tag)
    assert git(repo, "status", "--porcelain") == ""
    return repo / PROJECT_PATH


def diff(project: Path, temp: Path, *args, environ: dict[str, str] | None = None):
    env = {**git_environ(), "TMPDIR": str(temp), **(environ or {})}
    return ok(invoke(["diff", *args], cwd=project, environ=env))


def assert_clean(repo: Path, temp: Path) -> None:
    """No worktree left registered, no temporary folder left, nothing written in the repo."""
    listed = git(repo, "worktree", "list", "--porcelain")
    assert [line for line in listed.splitlines() if line.startswith("worktree ")] == [
        f"worktree {repo}"
    ]
    admin = repo / ".git" / "worktrees"
    assert not admin.exists() or list(admin.iterdir()) == []
    assert list(temp.iterdir()) == []
    assert git(repo, "status", "--porcelain") == ""


def files(directory: Path) -> dict[str, bytes]:
    """Every file but Python's bytecode cache (importing the candidate may write it) and the
    replay cache (docs/cache.md: no output of a command, tests/test_replay_cache.py)."""
    return {
        k: v
        for k, v in tree_bytes(directory).items()
        if "__pycache__" not in k and not k.startswith(".routectl_cache/")
    }


def report_of(path: Path) -> dict:
    report = load(path)
    assert schema_violation("report", report) is None
    return report


def moved(report: dict) -> dict[str, list[str]]:
    return {
        kind: sorted(i for c in report["categories"].values() for i in c[kind])
        for kind in ("changed", "added", "removed", "unexpected", "missing")
    }


def write_expected(path: Path, entries) -> Path:
    path.write_text(json.dumps(entries))
    return path


# --- against a git ref ---------------------------------------------------------------------


def test_ref_diff_reports_exactly_the_moved_rows(repo, temp, tmp_path):
    project = at(repo, "changed")
    listed = tmp_path / "listed.json"
    stated = tmp_path / "stated.json"
    summary = tmp_path / "summary.md"
    result = diff(
        project,
        temp,
        "--baseline-ref",
        "HEAD~1",
        "--report",
        tmp_path / "r.json",
        "--write-expected-ids",
        listed,
        "--write-expected",
        stated,
        "--summary",
        summary,
    )
    assert result.code == 1, result.stderr
    report = report_of(tmp_path / "r.json")
    assert moved(report) == {
        "changed": AFFECTED,
        "added": [],
        "removed": [],
        "unexpected": AFFECTED,
        "missing": [],
    }
    assert report["categories"]["toy-b"]["changed"] == []
    assert [g["patterns"] for g in report["categories"]["toy-a"]["groups"]] == [
        ["toy-a:toy_model/fp8_e4m3/tp{1,2}/none/c1/q{64,4096}"]
    ]
    assert result.stdout.splitlines()[:2] == [
        "toy-a: FAILED: 11 rows, 4 changed, 0 added, 0 removed",
        "  changed 4 rows (unexpected)",
    ]
    assert '    route.kernel: "FastKernel" -> "SlowKernel"' in result.stdout
    assert "    rows toy-a:toy_model/fp8_e4m3/tp{1,2}/none/c1/q{64,4096}" in result.stdout
    commit_id = git(repo, "rev-parse", "HEAD~1").strip()
    assert f"baseline: HEAD~1 = {commit_id[:12]}" in result.stderr
    assert result.stderr.splitlines()[-1].startswith(
        f"next: review {stated} (one entry per change group), replace each TODO reason, "
        f"then routectl diff --baseline-ref HEAD~1 --expected-changes {stated}"
    )
    assert [e["id"] for e in load(listed)] == AFFECTED
    assert [e["rows"] for e in load(stated)["changes"]] == [
        "toy-a:toy_model/fp8_e4m3/tp{1,2}/none/c1/q{64,4096}"
    ]
    assert summary.read_text().startswith("## routectl diff: FAILED\n")
    assert_clean(repo, temp)
    passing = diff(
        project,
        temp,
        "--baseline-ref",
        "HEAD~1",
        "--expected-changes",
        stated,
        "--format",
        "github",
    )
    assert passing.code == 0, passing.stdout
    assert passing.stdout == (
        "::notice title=routectl diff::ok: 2 categories, 22 rows, 4 expected changes\n"
    )
    # Fed back by id, with and without one more id: test_concurrent_diffs_in_one_repository.


def test_a_rename_and_move_reports_zero_changes(repo, temp):
    project = at(repo, "renamed")
    assert (project / "toyproj" / "shapes.py").is_file()
    result = diff(project, temp, "--baseline-ref", "HEAD~1")
    assert result.code == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "ok: 2 categories, 22 rows, 0 expected changes"
    assert_clean(repo, temp)


def test_the_baseline_is_computed_by_the_refs_code_never_read(repo, temp):
    """REF's retained snapshots are junk: the baseline is REF's own code, run in a worktree
    of REF without the policy's variables, the worktree first on PYTHONPATH."""
    project = at(repo, "junk")
    assert (project / "snapshots" / "toy-a.json").read_text().startswith("junk")
    before = files(project)
    caller = {
        "TOY_FAST": "0",
        "TOY_OTHER": "1",
        "KEEP_ME": "yes",
        "PYTHONPATH": "/caller/path",
        "GIT_INDEX_FILE": str(temp / "foreign-index"),
    }
    result = diff(project, temp, "--baseline-ref", "junk", "--format", "json", environ=caller)
    assert result.code == 0, result.stderr
    assert moved(json.loads(result.stdout)) == dict.fromkeys(
        ("changed", "added", "removed", "unexpected", "missing"), []
    )
    assert files(project) == before  # no retained file or .json.new written
    assert not (temp / "foreign-index").exists()  # git ignored the caller's index variable
    assert_clean(repo, temp)

    # The candidate imported the spy in this process; the baseline in its own.
    spied = [p for p in (repo.parent / "spy").glob("*.json") if p.stem != str(os.getpid())]
    assert len(spied) == 1
    seen = load(spied[0])
    environ = seen["environ"]
    assert not [k for k in environ if k.startswith("TOY_")]
    assert environ["KEEP_ME"] == "yes"
    worktree = Path(environ["PYTHONPATH"].split(os.pathsep)[0])
    assert worktree.parent.parent == temp and worktree.name.startswith(TEMP_PREFIX)
    assert environ["PYTHONPATH"].split(os.pathsep)[1:] == ["/caller/path", str(ENGINE_PATH)]
    assert Path(seen["cwd"]) == worktree / PROJECT_PATH
    assert Path(seen["module"]) == worktree / PROJECT_PATH / "toyproj" / "__init__.py"


@pytest.mark.parametrize(
    "ref,message",
    [
        # A full clone: nothing to fetch, so no hint to.
        ("no-such-ref", "error: unknown git ref 'no-such-ref' in {repo}\n"),
        ("origin/main", "error: unknown git ref 'origin/main' in {repo}\n"),
        (
            "no-project",
            "error: no-project has no routectl project: tools/toy/pyproject.toml does "
            "not exist there",
        ),
        (
            "no-table",
            "error: no-table has no routectl project: its tools/toy/pyproject.toml has "
            "no [tool.routectl] table",
        ),
    ],
)
def test_ref_input_errors(repo, temp, ref, message):
    project = at(repo, "base")
    result = diff(project, temp, "--baseline-ref", ref)
    assert result.code == 2 and result.stdout == ""
    assert len(result.lines) == 1 and message.format(repo=repo) in result.stderr, result.stderr
    assert_clean(repo, temp)


@pytest.mark.parametrize(
    "ref,fetch",
    [
        ("no-such-ref", "git fetch origin no-such-ref, or full history"),
        ("origin/feature", "git fetch origin feature, or full history"),
        ("x;rm -rf ~", "git fetch origin 'x;rm -rf ~', or full history"),
    ],
)
def test_unknown_ref_in_a_shallow_clone_hints_a_quoted_fetch(repo, tmp_path, temp, ref, fetch):
    clone = tmp_path / "shallow"
    done = subprocess.run(
        ["git", "clone", "-q", "--depth", "1", "--branch", "base", f"file://{repo}", str(clone)],
        env=git_environ(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = diff(clone / PROJECT_PATH, temp, "--baseline-ref", ref)
    assert result.code == 2 and len(result.lines) == 1, result.stderr
    assert result.lines[0].startswith(
        f"error: unknown git ref {ref!r} in {clone} (this clone is shallow): a shallow clone "
        f"(CI checkouts are) needs the ref fetched: {fetch}"
    )
    assert list(temp.iterdir()) == []


def test_not_inside_a_git_repository(tmp_path, temp):
    project = make_project(tmp_path)
    result = diff(
        project, temp, "--baseline-ref", "HEAD", environ={"GIT_CEILING_DIRECTORIES": str(tmp_path)}
    )
    assert result.code == 2 and result.stdout == ""
    assert len(result.lines) == 1
    assert result.lines[0].startswith(f"error: not inside a git repository: {project}")
    assert "(git: fatal: not a git repository" in result.lines[0]  # git's own words
    assert list(temp.iterdir()) == []


@pytest.mark.parametrize(
    "ref,message,dependencies",
    [
        ("broken-import", "ModuleNotFoundError: No module named 'toy_missing_dependency'", True),
        ("broken-runtime", "RuntimeError: toy baseline exploded", False),
    ],
)
def test_a_failing_baseline_exits_2_and_cleans_up(repo, temp, ref, message, dependencies):
    project = at(repo, "base")
    result = diff(project, temp, "--baseline-ref", ref)
    assert result.code == 2 and result.stdout == ""
    assert len(result.lines) == 1, result.stderr
    line = result.lines[0]
    assert line.startswith(f"error: the baseline at {ref} (") and message in line
    assert "--debug" not in line
    assert ("may need dependencies the current environment lacks" in line) is dependencies
    assert_clean(repo, temp)
    if not dependencies:  # --debug adds everything the baseline printed
        env = {**git_environ(), "TMPDIR": str(temp)}
        debug = invoke(["--debug", "diff", "--baseline-ref", ref], cwd=project, environ=env)
        assert debug.code == 2
        # The baseline ran with --debug too: its traceback comes back.
        assert debug.lines[0] == "baseline> Traceback (most recent call last):"
        assert debug.lines[-2].startswith("baseline> error: ") and message in debug.lines[-2]
        # The same last line (but for the baseline's own temporary folder name).
        temp_name = re.compile(TEMP_PREFIX + r"\w+")
        assert temp_name.sub("", debug.lines[-1]) == temp_name.sub("", line)
        assert_clean(repo, temp)


def cli_process(project: Path, temp: Path, *args: str) -> subprocess.Popen[str]:
    """`python -m routectl diff ...` as a real process."""
    env = {**git_environ(), "TMPDIR": str(temp), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "routectl", "diff", *args],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C's default action, whatever the test run inherited (a suite started as a
        # background job ignores SIGINT).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def test_ctrl_c_during_the_baseline_cleans_up(repo, temp):
    project = at(repo, "base")
    process = cli_process(project, temp, "--baseline-ref", "slow")
    marker = None
    deadline = time.monotonic() + 30
    while marker is None and time.monotonic() < deadline and process.poll() is None:
        found = sorted(temp.glob(f"{TEMP_PREFIX}*/*/{PROJECT_PATH}/baseline-started"))
        marker = found[0] if found and found[0].read_text() else None
        time.sleep(0.05)
    assert marker is not None, process.communicate()
    baseline_pid = int(marker.read_text())
    # The candidate replays meanwhile, and importing torch can swallow a KeyboardInterrupt
    # (seen with torch 2.13): press Ctrl-C again, as a user would, while nothing happens.
    for _ in range(10):
        process.send_signal(signal.SIGINT)
        try:
            out, err = process.communicate(timeout=3)
            break
        except subprocess.TimeoutExpired:
            continue
    else:
        process.kill()
        pytest.fail(f"diff ignored Ctrl-C: {process.communicate()}")
    # -SIGINT: a repeated press that landed after cleanup, during the exit itself.
    assert process.returncode in (130, -signal.SIGINT), err
    with pytest.raises(ProcessLookupError):
        os.kill(baseline_pid, 0)  # the baseline subprocess was stopped and reaped
    assert_clean(repo, temp)


def test_concurrent_diffs_in_one_repository(repo, temp, tmp_path):
    """Two diffs at once in one repository: exactly the moved rows listed passes; one more id
    (a row that did not move) fails as missing."""
    project = at(repo, "changed")
    exact = write_expected(tmp_path / "exact.json", AFFECTED)
    extra = "toy-b:toy_other/float16/tp1/none/c1/q64"
    more = write_expected(tmp_path / "more.json", [*AFFECTED, extra])
    processes = [
        cli_process(
            project,
            temp,
            "--baseline-ref",
            "HEAD~1",
            "--expected-changes",
            str(path),
            "--format",
            "json",
        )
        for path in (exact, more)
    ]
    # Only a hang guard: two diffs replay every toy row twice, minutes on a loaded runner.
    outputs = [p.communicate(timeout=900) for p in processes]
    assert [p.returncode for p in processes] == [0, 1], outputs
    reports = [json.loads(out) for out, _ in outputs]
    assert moved(reports[0]) == {
        "changed": AFFECTED,
        "added": [],
        "removed": [],
        "unexpected": [],
        "missing": [],
    }
    assert moved(reports[1]) == {**moved(reports[0]), "missing": [extra]}
    assert_clean(repo, temp)


# --- against pre-built files ---------------------------------------------------------------


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Path]:
    """A toy project copy, its baseline folder, then the capability condition changed."""
    project = make_project(tmp_path)
    baseline = tmp_path / "baseline"
    assert ok(invoke(["snapshot", "--all", "--output-dir", baseline], cwd=project)).code == 0
    edit(project / "toyproj" / "__init__.py", FAST, FAST_SM75_FP8)
    return project, baseline


def diff_files(project: Path, *args):
    return ok(invoke(["diff", *args], cwd=project))


def test_baseline_folder_and_file(built, tmp_path):
    project, baseline = built
    before = files(project)
    result = diff_files(project, "--baseline", baseline, "--report", tmp_path / "r.json")
    assert result.code == 1
    assert moved(report_of(tmp_path / "r.json"))["unexpected"] == AFFECTED
    assert files(project) == before  # no .json.new, no retained file touched

    result = diff_files(project, "--baseline", baseline / "toy-a.json", "--format", "json")
    assert result.code == 1
    report = json.loads(result.stdout)
    assert list(report["categories"]) == ["toy-a"]  # one file judges its category only
    assert moved(report)["changed"] == AFFECTED
    cached = tmp_path / "cached-toy-b.snapshot"  # any file name
    shutil.copy(baseline / "toy-b.json", cached)
    result = diff_files(project, "--baseline", cached)
    assert result.code == 0 and result.stdout.startswith("toy-b: ok: 11 rows, no changes")
    result = diff_files(project, "--baseline", cached, "-c", "toy-a")
    assert result.code == 2 and "holds only category toy-b; -c also names toy-a" in result.stderr


def test_categories_on_one_side_only_are_added_or_removed(built, tmp_path):
    project, baseline = built
    (baseline / "toy-b.json").unlink()
    gone = load(baseline / "toy-a.json")
    gone["category"] = "toy-gone"
    save(baseline / "toy-gone.json", gone)
    listed = tmp_path / "listed.json"
    result = diff_files(
        project, "--baseline", baseline, "--format", "json", "--write-expected", listed
    )
    assert result.code == 1
    report = json.loads(result.stdout)
    assert schema_violation("report", report) is None
    assert len(report["categories"]["toy-b"]["added"]) == 11
    assert report["categories"]["toy-gone"]["rows"] == 0
    assert report["categories"]["toy-gone"]["removed"] == sorted(
        f"toy-gone:{r['id']}" for r in gone["rows"]
    )
    assert report["stale"] == []
    assert "category toy-gone is only in the baseline" in result.stderr
    # One stated entry per change group: the changed rows, then added and removed ones.
    assert [e["rows"] for e in load(listed)["changes"]] == [
        "toy-a:toy_model/fp8_e4m3/tp{1,2}/none/c1/q{64,4096}",
        "toy-b:toy_other/{float16,fp8_e4m3}/tp{1,2}/none/c1/q{64,4096}",
        "toy-b:edge:refused",
        "toy-b:edge:slow",
        "toy-b:toy_na/float16/tp1/none/c1/q64",
        "toy-gone:toy_model/{float16,fp8_e4m3}/tp{1,2}/none/c1/q{64,4096}",
        "toy-gone:edge:refused",
        "toy-gone:edge:slow",
        "toy-gone:toy_na/float16/tp1/none/c1/q64",
    ]
    again = diff_files(project, "--baseline", baseline, "--expected-changes", listed)
    assert again.code == 0, again.stdout
    # A filtered run judges only what it names, a removed category included.
    assert (
        diff_files(
            project, "--baseline", baseline, "-c", "toy-gone", "--expected-changes", listed
        ).code
        == 0
    )


@pytest.mark.parametrize(
    "version,message",
    [
        (
            0,
            "has schema_version 0, older than 1, and this routectl has no migration from version "
            "0: rebuild the cached baseline",
        ),
        (2, "has schema_version 2, written by a newer routectl (this one reads 1): upgrade"),
    ],
)
def test_baseline_schema_versions(built, version, message):
    project, baseline = built
    data = load(baseline / "toy-a.json")
    data["schema_version"] = version
    save(baseline / "toy-a.json", data)
    result = diff_files(project, "--baseline", baseline)
    assert result.code == 2 and len(result.lines) == 1
    assert message in result.stderr, result.stderr


def test_migrations_bring_old_documents_to_the_current_version(built, tmp_path):
    _, baseline = built
    data = load(baseline / "toy-a.json")
    old = {
        **data,
        "schema_version": 0,
        "rows": [{"key": r["id"], "route": r["route"]} for r in data["rows"]],
    }
    path = tmp_path / "v0.json"
    save(path, old)

    def from_v0(document):
        rows = [{"id": r["key"], "route": r["route"]} for r in document["rows"]]
        return {**document, "schema_version": 1, "rows": rows}

    snapshot = read_baseline_snapshot(path, advice="n/a", migrations={0: from_v0})
    assert snapshot.category == "toy-a" and list(snapshot.rows) == data["rows"]
    with pytest.raises(InputError, match="schema_version 0, older than 1.*: do this"):
        read_baseline_snapshot(path, advice="do this")
    with pytest.raises(RoutectlError, match="produced version 0, not 1"):
        read_baseline_snapshot(path, advice="n/a", migrations={0: lambda d: d})


@pytest.mark.parametrize(
    "args,message",
    [
        ([], "give exactly one of --baseline-ref REF and --baseline PATH"),
        (["--baseline", "x", "--baseline-ref", "HEAD"], "give exactly one of"),
        (["--baseline", "missing"], "baseline missing does not exist"),
        (["--baseline", "empty"], "holds no <category>.json snapshot"),
        (
            ["--baseline", "baseline", "--expected-changes", "nope.json"],
            "cannot read expected-changes file nope.json",
        ),
    ],
)
def test_baseline_usage_errors(built, args, message):
    project, baseline = built
    (project / "empty").mkdir()
    shutil.copytree(baseline, project / "baseline")
    result = diff_files(project, *args)
    assert result.code == 2 and result.stdout == ""
    assert len(result.lines) == 1 and message in result.stderr, result.stderr
