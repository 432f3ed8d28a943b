"""`routectl.review.baseline`, called directly: the ref's project check, the subprocess's
environment and command line, the failure line, the log tail, and a RefBaseline's life
(start, wait, close) in throwaway repositories whose `routectl` package is a stand-in that
records what it was given.

Pins the module's docstring and docs/architecture.md ("Snapshot files"): the baseline runs
`python -m routectl snapshot --all --output-dir DIR` (with `--debug` before the command
when asked) from the worktree's project root, the worktree first on PYTHONPATH, the policy's
variables and the test checkpoints' variable removed; its failure is one line; everything
temporary lives in one folder that is gone afterwards, also when the caller's block raises.
A ref whose pyproject has no `[tool.routectl]` table is an input error (exit 2), also when its
`tool` key is no table (that one was an AttributeError, exit 3, before).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from routectl.errors import InputError
from routectl.io.schemas import schema_of
from routectl.review import baseline as rb
from routectl.runtime import checkpoints
from tests.fixtures.toy import TEMPLATE, invoke
from tests.project_files import ROOT, commit_all, git, git_environ

PROJECT = Path("tools") / "proj"
# A stand-in `routectl` package: `python -m routectl ...` records its argv, cwd, environment
# and sys.path, then does what the ROUTECTL_FAKE variable says.
FAKE_MAIN = """
import json, os, sys, time
mode = os.environ.get("ROUTECTL_FAKE", "ok")
out = sys.argv[-1]
record = {"argv": sys.argv[1:], "cwd": os.getcwd(), "environ": dict(os.environ),
          "path": sys.path, "stdin": sys.stdin.read()}
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "record.json"), "w") as f:
    json.dump(record, f)
print("some output", flush=True)
if mode == "fail":
    print("error: it broke (run with --debug for the traceback)", file=sys.stderr)
    sys.exit(2)
if mode == "sleep":
    time.sleep(60)
if mode == "snapshot":
    with open(os.path.join(out, "toy-a.json"), "w") as f:
        json.dump({"schema_version": 1, "category": "toy-a", "basis": "b", "rows": []}, f)
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository whose project (at tools/proj) has `[tool.routectl]` and whose root holds
    the stand-in `routectl` package."""
    root = tmp_path / "repo"
    (root / PROJECT).mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / PROJECT / "pyproject.toml").write_text('[tool.routectl]\nproject = "x"\n')
    (root / "routectl").mkdir()
    (root / "routectl" / "__init__.py").write_text("")
    (root / "routectl" / "__main__.py").write_text(FAKE_MAIN)
    commit_all(root, "project")
    return root.resolve()


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


# --- the ref's project -----------------------------------------------------------------------


def pyproject_commit(repo: Path, text: str | None) -> str:
    path = repo / PROJECT / "pyproject.toml"
    if text is None:
        path.unlink()
    else:
        path.write_text(text)
    return commit_all(repo, "pyproject")


def test_a_project_with_the_table_passes(repo: Path) -> None:
    rb.check_project_at(repo, head(repo), "main", PROJECT, git_environ())


@pytest.mark.parametrize(
    "text,why",
    [
        (None, "tools/proj/pyproject.toml does not exist there"),
        ('[project]\nname = "x"\n', "its tools/proj/pyproject.toml has no [tool.routectl] table"),
        ("[tool.other]\nx = 1\n", "its tools/proj/pyproject.toml has no [tool.routectl] table"),
        ("[tool]\nroutectl = 1\n", "its tools/proj/pyproject.toml has no [tool.routectl] table"),
        ('tool = "x"\n', "its tools/proj/pyproject.toml has no [tool.routectl] table"),
        ("tool = [1, 2]\n", "its tools/proj/pyproject.toml has no [tool.routectl] table"),
    ],
)
def test_a_ref_without_a_routectl_table_is_an_input_error(
    repo: Path, text: str | None, why: str
) -> None:
    commit = pyproject_commit(repo, text)
    with pytest.raises(InputError) as caught:
        rb.check_project_at(repo, commit, "REF", PROJECT, git_environ())
    assert str(caught.value) == f"REF has no routectl project: {why}"


def test_a_ref_with_invalid_toml_quotes_the_parser(repo: Path) -> None:
    commit = pyproject_commit(repo, "[tool.routectl\n")
    with pytest.raises(InputError) as caught:
        rb.check_project_at(repo, commit, "REF", PROJECT, git_environ())
    assert str(caught.value).startswith(
        "REF has no routectl project: its tools/proj/pyproject.toml is not valid TOML ("
    )
    assert caught.value.__suppress_context__


def test_a_non_table_tool_through_the_cli_exits_2(repo: Path) -> None:
    # The product bug: `tool = "x"` in the ref's pyproject made `routectl diff` crash with
    # an AttributeError (exit 3, "internal error") instead of this input error (exit 2).
    current = repo / "current"
    shutil.copytree(TEMPLATE, current, ignore=shutil.ignore_patterns("__pycache__"))
    pyproject = current / "pyproject.toml"
    working = pyproject.read_text()
    pyproject.write_text('tool = "x"\n')
    commit_all(repo, "a pyproject whose tool key is a string")
    git(repo, "tag", "non-table")
    pyproject.write_text(working)  # the working tree is a routectl project again
    result = invoke(["diff", "--baseline-ref", "non-table"], cwd=current, environ=git_environ())
    assert (result.code, result.stdout) == (2, ""), result.stderr
    assert result.stderr.splitlines() == [
        "error: non-table has no routectl project: its current/pyproject.toml has no "
        "[tool.routectl] table"
    ]


# --- the subprocess's environment and failure line ------------------------------------------


def test_baseline_environ_strips_the_policys_variables_and_orders_pythonpath() -> None:
    environ = {
        "TOY_FAST": "1",
        "TOYX": "kept",  # another prefix
        "OTHER_A": "2",
        checkpoints.VARIABLE: "/cp",
        "HOME": "/h",
        "PYTHONPATH": "/caller",
    }
    env = rb.baseline_environ(
        environ, strip_prefixes=("TOY_", "OTHER_"), worktree=Path("/wt"), engine_path=Path("/eng")
    )
    assert env == {
        "TOYX": "kept",
        "HOME": "/h",
        "PYTHONPATH": os.pathsep.join(["/wt", "/caller", "/eng"]),
    }


def test_baseline_environ_without_prefixes_engine_or_caller_path() -> None:
    # An empty prefix strips nothing (every name starts with ""); an empty PYTHONPATH adds
    # no empty entry (which would put the working directory on the path).
    environ = {"A": "1", "PYTHONPATH": "", checkpoints.VARIABLE: "x"}
    env = rb.baseline_environ(environ, strip_prefixes=("",), worktree=Path("/wt"), engine_path=None)
    assert env == {"A": "1", "PYTHONPATH": "/wt"}
    env = rb.baseline_environ({"B": "2"}, strip_prefixes=(), worktree=Path("/wt"), engine_path=None)
    assert env == {"B": "2", "PYTHONPATH": "/wt"}


COMMIT = "0123456789abcdef0123"


@pytest.mark.parametrize(
    "code,output,tail",
    [
        (2, "", "failed (exit 2): no output"),
        (2, "  \n\n", "failed (exit 2): no output"),
        (2, "first\n  last line  \n\n", "failed (exit 2): last line"),
        (2, "error: bad input\n", "failed (exit 2): bad input"),
        (
            3,
            "x\ninternal error: boom (run with --debug for the traceback)\n",
            "failed (exit 3): boom",
        ),
        (1, "error: not twice error: x\n", "failed (exit 1): not twice error: x"),
        (-9, "killed\n", "failed (killed by signal 9): killed"),
        (0, "zero\n", "failed (exit 0): zero"),
    ],
)
def test_failure_message(code: int, output: str, tail: str) -> None:
    assert rb._failure_message("REF", COMMIT, code, output) == (
        f"the baseline at REF (0123456789ab) {tail}"
    )


def test_failure_message_shortens_past_the_limit_only() -> None:
    at_limit = "x" * rb.MAX_TAIL_CHARS
    prefix = "the baseline at R (0123456789ab) failed (exit 2): "
    assert rb._failure_message("R", COMMIT, 2, at_limit) == prefix + at_limit
    over = at_limit + "y"
    assert rb._failure_message("R", COMMIT, 2, over) == prefix + "x" * 297 + "..."


@pytest.mark.parametrize("kind", ["ModuleNotFoundError", "ImportError"])
def test_failure_message_of_an_import_failure_on_any_line_advises(kind: str) -> None:
    output = f"Traceback\n{kind}: No module named 'dep'\nerror: it failed\n"
    assert rb._failure_message("REF", COMMIT, 2, output) == (
        "the baseline at REF (0123456789ab) failed (exit 2): it failed; REF may need "
        "dependencies the current environment lacks (install them, or build the baseline "
        "elsewhere and pass it with --baseline PATH)"
    )


def test_log_tail_keeps_the_last_mebibyte_decoded_with_replacement(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_bytes(b"a" * 10 + b"b" * rb.MAX_LOG_BYTES)
    assert rb._log_tail(log) == "b" * rb.MAX_LOG_BYTES
    log.write_bytes(b"short \xff end")
    assert rb._log_tail(log) == "short \ufffd end"
    assert rb.MAX_LOG_BYTES == 1 << 20


def test_ref_advice() -> None:
    assert rb.ref_advice("v1") == (
        "v1's routectl writes an old format; compare against a newer ref, or build its "
        "snapshots with this routectl and pass them with --baseline DIR"
    )


def test_temp_parent_prefers_the_argument_then_tmpdir() -> None:
    assert rb._temp_parent({"TMPDIR": "/t"}, Path("/given")) == "/given"
    assert rb._temp_parent({"TMPDIR": "/t"}, None) == "/t"
    assert rb._temp_parent({"TMPDIR": ""}, None) is None
    assert rb._temp_parent({}, None) is None


# --- a baseline's life -----------------------------------------------------------------------


def environ_for(tmp_path: Path, mode: str) -> dict[str, str]:
    return {**git_environ(), "ROUTECTL_FAKE": mode, "TMPDIR": str(tmp_path / "tmp")}


def record_of(directory: Path) -> dict:
    return json.loads((directory / "record.json").read_text())


@pytest.mark.parametrize("debug", [False, True])
def test_a_ref_baseline_runs_the_stable_command_in_its_worktree(
    repo: Path, tmp_path: Path, debug: bool
) -> None:
    temps = tmp_path / "tmp"
    temps.mkdir()
    environ = {**environ_for(tmp_path, "ok"), "TOY_SECRET": "1", checkpoints.VARIABLE: ""}
    with rb.baseline_at_ref(
        repo / PROJECT,
        "main",
        environ=environ,
        strip_prefixes=("TOY_",),
        python=sys.executable,
        debug=debug,
    ) as build:
        (made,) = temps.iterdir()  # one folder, under the environment's TMPDIR
        assert made.name.startswith(rb.TEMP_PREFIX)
        assert build.temp_dir == made
        assert build.worktree == made / made.name
        assert (build.commit, build.repository, build.project_path) == (head(repo), repo, PROJECT)
        out = build.wait()
        assert out == made / "snapshots"
        record = record_of(out)
        command = ["--debug"] if debug else []
        assert record["argv"] == [*command, "snapshot", "--all", "--output-dir", str(out)]
        assert record["cwd"] == str(made / made.name / PROJECT)
        assert record["stdin"] == ""
        # The ref's tree has a routectl package of its own: no engine path after it.
        assert record["environ"]["PYTHONPATH"] == str(made / made.name)
        assert "TOY_SECRET" not in record["environ"]
        assert checkpoints.VARIABLE not in record["environ"]
        assert record["environ"]["ROUTECTL_FAKE"] == "ok"
        assert (made / "baseline.log").read_text() == "some output\n"
        # The worktree goes as soon as the baseline is done.
        assert not build.worktree.exists()
        assert "worktree " + str(build.worktree) not in git(repo, "worktree", "list", "--porcelain")
    assert list(temps.iterdir()) == []


def test_a_ref_without_its_own_routectl_runs_this_engine(repo: Path, tmp_path: Path) -> None:
    git(repo, "rm", "-q", "-r", "routectl")
    commit_all(repo, "a project that depends on routectl")
    # The stand-in stays importable from the caller's PYTHONPATH, ahead of the engine.
    stand_in = tmp_path / "stand-in"
    (stand_in / "routectl").mkdir(parents=True)
    (stand_in / "routectl" / "__init__.py").write_text("")
    (stand_in / "routectl" / "__main__.py").write_text(FAKE_MAIN)
    (tmp_path / "tmp").mkdir()
    environ = {**environ_for(tmp_path, "ok"), "PYTHONPATH": str(stand_in)}
    with rb.baseline_at_ref(repo / PROJECT, "main", environ=environ) as build:
        record = record_of(build.wait())
        assert record["environ"]["PYTHONPATH"] == os.pathsep.join(
            [str(build.worktree), str(stand_in), str(rb.ENGINE_PATH)]
        )
        assert build.python == sys.executable


def test_a_failed_baseline_raises_one_line_with_its_output(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir()
    with rb.baseline_at_ref(repo / PROJECT, "main", environ=environ_for(tmp_path, "fail")) as build:
        with pytest.raises(rb.BaselineFailed) as caught:
            build.wait()
        assert str(caught.value) == (
            f"the baseline at main ({head(repo)[:12]}) failed (exit 2): it broke"
        )
        assert caught.value.output == (
            "some output\nerror: it broke (run with --debug for the traceback)\n"
        )
        assert not build.worktree.exists()
    assert list((tmp_path / "tmp").iterdir()) == []


def test_closing_a_running_baseline_kills_it_and_removes_everything(
    repo: Path, tmp_path: Path
) -> None:
    (tmp_path / "tmp").mkdir()
    with rb.baseline_at_ref(
        repo / PROJECT, "main", environ=environ_for(tmp_path, "sleep")
    ) as build:
        process = build.process
        assert process is not None and process.returncode is None
    assert process.returncode is not None and process.returncode < 0  # killed, not waited out
    assert list((tmp_path / "tmp").iterdir()) == []
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_the_caller_s_error_still_removes_everything(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir()
    with pytest.raises(KeyError):
        with rb.baseline_at_ref(repo / PROJECT, "main", environ=environ_for(tmp_path, "sleep")):
            raise KeyError("the caller's")
    assert list((tmp_path / "tmp").iterdir()) == []
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_temp_parent_argument_wins_over_tmpdir(repo: Path, tmp_path: Path) -> None:
    given = tmp_path / "given"
    given.mkdir()
    (tmp_path / "tmp").mkdir()
    with rb.baseline_at_ref(
        repo / PROJECT, "main", environ=environ_for(tmp_path, "ok"), temp_parent=given
    ) as build:
        assert build.temp_dir.parent == given
        build.wait()
    assert list(given.iterdir()) == [] and list((tmp_path / "tmp").iterdir()) == []


def test_a_missing_temp_parent_is_an_input_error(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        with rb.baseline_at_ref(
            repo / PROJECT, "main", environ=git_environ(), temp_parent=tmp_path / "none"
        ):
            pass
    assert str(caught.value) == (
        "cannot create a temporary folder for the baseline: No such file or directory"
    )


def test_an_unknown_ref_fails_before_any_temporary_folder(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir()
    with pytest.raises(InputError):
        with rb.baseline_at_ref(repo / PROJECT, "nope", environ=environ_for(tmp_path, "ok")):
            pass
    assert list((tmp_path / "tmp").iterdir()) == []


def test_waiting_for_a_baseline_never_started(tmp_path: Path) -> None:
    build = rb.RefBaseline(
        ref="r",
        commit=COMMIT,
        repository=tmp_path,
        project_path=Path("."),
        temp_dir=tmp_path / "t",
        environ={},
        strip_prefixes=(),
        python=sys.executable,
    )
    with pytest.raises(RuntimeError) as caught:
        build.wait()
    assert str(caught.value) == "the baseline was not started"
    (tmp_path / "t").mkdir()
    build.close()  # nothing started, no worktree: only the folder goes
    assert not (tmp_path / "t").exists()
    build.close()  # a folder gone already is no cleanup failure: close never raises


def test_the_baseline_source_reads_the_refs_files_with_its_advice_and_schema(
    repo: Path, tmp_path: Path
) -> None:
    (tmp_path / "tmp").mkdir()
    # Refuses the stand-in's snapshot (basis "b"), which routectl's generic schema admits.
    strict = schema_of(
        {"type": "object", "properties": {"basis": {"const": "toy"}}}, Path("strict.json")
    )
    with rb.baseline_at_ref(
        repo / PROJECT, "main", environ=environ_for(tmp_path, "snapshot")
    ) as build:
        source = build.source(schema=strict)
        out = build.output_dir
        assert source.names() == ["record", "toy-a"]
        assert source.file_of("toy-a") == (out / "toy-a.json", rb.ref_advice("main"))
        with pytest.raises(InputError) as caught:
            source.load("toy-a")
        assert str(caught.value) == f"{out / 'toy-a.json'}: basis: 'toy' was expected"


def test_the_baseline_reads_no_input_of_the_callers(repo: Path, tmp_path: Path) -> None:
    # A child process whose standard input holds what a user typed: the baseline it starts
    # reads none of it (its stdin is /dev/null, not the terminal it would share).
    (tmp_path / "tmp").mkdir()
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from routectl.review import baseline as rb\n"
        "environ = json.loads(sys.argv[1])\n"
        "with rb.baseline_at_ref(Path(sys.argv[2]), 'main', environ=environ) as build:\n"
        "    out = build.wait()\n"
        "    print(json.loads((out / 'record.json').read_text())['stdin'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(environ_for(tmp_path, "ok")), repo / PROJECT],
        input=b"typed by the user\n",
        capture_output=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"\n", b"")


def test_a_worktree_that_cannot_be_added_names_the_ref(repo: Path, tmp_path: Path) -> None:
    temp = tmp_path / "t"
    (temp / temp.name).mkdir(parents=True)
    (temp / temp.name / "in-the-way").write_text("")
    build = rb.RefBaseline(
        ref="release/1",
        commit=head(repo),
        repository=repo,
        project_path=PROJECT,
        temp_dir=temp,
        environ=git_environ(),
        strip_prefixes=(),
        python=sys.executable,
    )
    try:
        with pytest.raises(InputError) as caught:
            build.start()
        # git's own words follow (their wording is git's, by version).
        message = str(caught.value)
        assert message.startswith("cannot check out release/1 into a temporary worktree (git: ")
        assert str(temp / temp.name) in message
        assert build.process is None
    finally:
        build.close()
    assert not temp.exists()
