"""Ctrl-C and kills at known moments, in real processes.

Signals are timed by checkpoints (`routectl.runtime.checkpoints`): the run, started with
ROUTECTL_TEST_CHECKPOINTS=DIR, creates DIR/<point> on reaching a point and waits there until
the file is removed; the test waits for the file, signals, and removes it. No sleeps decide
when a signal lands. The process runs in its own session and SIGINT goes to its whole process
group, as a terminal's Ctrl-C does (workers, git and the baseline run included).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.toy import TEMPLATE, invoke, make_project, tree_bytes
from tests.project_files import git_environ

ROOT = Path(__file__).resolve().parents[1]
ROW = "toy_model/float16/tp1/none/c1/q64"
# How long a run may take to reach a checkpoint on a busy runner (torch imports included):
# a bound on a wait for the file, never a delay.
REACH_S = 240.0
TEMP_GLOB = ".*.routectl-*-*.tmp"
POLICY_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("interrupts"))


@pytest.fixture
def project(template: Path, tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(template, root)
    return root


def moved(document: dict) -> None:
    """One retained row changed, as if the code had moved it: `--update` rewrites the file."""
    row = next(r for r in document["rows"] if r["id"] == ROW)
    row["route"]["dispatch"][0]["plan"]["split_k"] = 99


def environ(stops: Path, **extra: str) -> dict[str, str]:
    return {
        **git_environ(),
        "PYTHONPATH": str(ROOT),
        "ROUTECTL_TEST_CHECKPOINTS": str(stops),
        # Every run here stops inside a replay (or a baseline's): none may come from the
        # replay cache (tests/test_replay_cache.py).
        "ROUTECTL_NO_CACHE": "1",
        **extra,
    }


def start(
    project: Path, stops: Path, args: list[str], *, ignore_sigint: bool = False, **extra: str
) -> subprocess.Popen[str]:
    stops.mkdir(exist_ok=True)

    def prepare() -> None:
        # Set, not inherited from whatever started the tests (a suite run as a background
        # job ignores SIGINT): ignored as a shell starts a background job, inherited across
        # exec, or the default action.
        for signum in POLICY_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        if ignore_sigint:
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    return subprocess.Popen(
        [sys.executable, "-m", "routectl", *args],
        cwd=project,
        env=environ(stops, **extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=prepare,
    )


def default_signals() -> None:
    """A child's preexec: the policy's signals at their default action, whatever the test
    run inherited."""
    for signum in POLICY_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)


def reached(process: subprocess.Popen[str], stops: Path, point: str) -> Path:
    """Wait until the run stops at `point`; the checkpoint's file."""
    flag = stops / point
    deadline = time.monotonic() + REACH_S
    while not flag.exists():
        if process.poll() is not None:
            out, err = process.communicate()
            raise AssertionError(f"ended ({process.returncode}) before {point}: {err}")
        if time.monotonic() > deadline:  # a hang guard, not a speed assertion
            raise AssertionError(f"{point} not reached")
        time.sleep(0.01)
    return flag


def reached_one(process: subprocess.Popen[str], stops: Path, points: tuple[str, ...]) -> Path:
    """Wait until the run stops at one of `points`; that checkpoint's file."""
    deadline = time.monotonic() + REACH_S
    while not (found := [stops / p for p in points if (stops / p).exists()]):
        if process.poll() is not None:
            raise AssertionError(f"ended ({process.returncode}) before {points}")
        if time.monotonic() > deadline:  # a hang guard, not a speed assertion
            raise AssertionError(f"none of {points} reached")
        time.sleep(0.01)
    return found[0]


def ctrl_c(process: subprocess.Popen[str]) -> None:
    os.killpg(process.pid, signal.SIGINT)


def finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=REACH_S)
    return process.returncode, out, err


def interrupt(process: subprocess.Popen[str], stops: Path) -> tuple[int, str, str]:
    """Ctrl-C, then let the run past the `shutdown` checkpoint, which an interrupted command
    reaches too (left in place, the run would wait there until checkpoints.MAX_WAIT_S)."""
    ctrl_c(process)
    reached(process, stops, "shutdown").unlink()
    return finish(process)


def assert_interrupted(code: int, err: str) -> None:
    assert code == 130, err
    assert err == "error: interrupted\n", err


def test_ctrl_c_at_startup(project: Path, tmp_path: Path) -> None:
    before = tree_bytes(project / "snapshots")
    process = start(project, tmp_path / "stops", ["check"])
    reached(process, tmp_path / "stops", "startup")
    ctrl_c(process)
    code, out, err = finish(process)
    assert_interrupted(code, err)
    assert out == ""
    assert tree_bytes(project / "snapshots") == before


def test_ctrl_c_during_replay_stops_workers_and_writes_nothing(
    project: Path, tmp_path: Path
) -> None:
    stops = tmp_path / "stops"
    data = json.loads((project / "snapshots" / "toy-a.json").read_text())
    moved(data)  # so that --update would write
    (project / "snapshots" / "toy-a.json").write_text(json.dumps(data))
    before = tree_bytes(project / "snapshots")
    process = start(project, stops, ["check", "--update", "--accept-all", "-j", "2"])
    flag = reached(process, stops, "startup")
    flag.unlink()
    reached(process, stops, "worker")
    reached(process, stops, "replay")
    code, out, err = interrupt(process, stops)
    assert_interrupted(code, err)
    assert tree_bytes(project / "snapshots") == before
    assert not list((project / "snapshots").glob(TEMP_GLOB))


def test_ctrl_c_at_shutdown(project: Path, tmp_path: Path) -> None:
    stops = tmp_path / "stops"
    process = start(project, stops, ["list"])
    reached(process, stops, "startup").unlink()
    reached(process, stops, "shutdown")
    ctrl_c(process)
    code, out, err = finish(process)
    assert_interrupted(code, err)
    assert out.splitlines()[0].startswith("toy-a")  # the command's output came out first


def test_ignored_sigint_is_ignored_by_workers_too(project: Path, tmp_path: Path) -> None:
    stops = tmp_path / "stops"
    process = start(project, stops, ["check", "-j", "2"], ignore_sigint=True)
    reached(process, stops, "startup").unlink()
    worker = reached(process, stops, "worker")
    replay = reached(process, stops, "replay")
    ctrl_c(process)  # a background job's Ctrl-C: nobody may die of it
    # The signal is delivered (or not) before kill returns for this process group; the
    # worker's fate is settled once the checkpoints go and the run ends.
    worker.unlink()
    replay.unlink()
    reached(process, stops, "shutdown").unlink()
    code, out, err = finish(process)
    assert code == 0, err
    assert err == "" and out.splitlines()[-1].startswith("ok: 2 categories")


def test_default_workers_die_with_ctrl_c_and_the_run_exits_130(
    project: Path, tmp_path: Path
) -> None:
    stops = tmp_path / "stops"
    process = start(project, stops, ["check", "-j", "2"])
    reached(process, stops, "startup").unlink()
    reached(process, stops, "worker")
    code, out, err = interrupt(process, stops)
    assert_interrupted(code, err)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        env=environ(repo),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def diff_at_baseline(tmp_path: Path) -> tuple[Path, Path, Path, subprocess.Popen[str]]:
    """`routectl diff --baseline-ref HEAD` on a committed toy repository, stopped where its
    baseline runs (worktree added, TMPDIR `temp`): (repo, temp, stops, process)."""
    repo = committed_repo(tmp_path)
    temp = tmp_path / "tmp"
    temp.mkdir()
    stops = tmp_path / "stops"
    process = start(repo, stops, ["diff", "--baseline-ref", "HEAD"], TMPDIR=str(temp))
    reached(process, stops, "startup").unlink()
    reached(process, stops, "baseline")
    return repo, temp, stops, process


def test_ctrl_c_while_the_baseline_worktree_exists(tmp_path: Path) -> None:
    repo, temp, stops, process = diff_at_baseline(tmp_path)
    assert len(list(temp.iterdir())) == 1  # the worktree and the baseline run exist
    code, out, err = interrupt(process, stops)
    assert_interrupted(code, err)
    listed = git(repo, "worktree", "list", "--porcelain")
    assert [line for line in listed.splitlines() if line.startswith("worktree ")] == [
        f"worktree {repo}"
    ]
    assert list(temp.iterdir()) == []
    assert git(repo, "status", "--porcelain") == ""


def test_sigkill_during_update_then_a_normal_run(project: Path, tmp_path: Path) -> None:
    stops = tmp_path / "stops"
    path = project / "snapshots" / "toy-a.json"
    data = json.loads(path.read_text())
    moved(data)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    old = path.read_bytes()
    process = start(project, stops, ["check", "--update", "--accept-all", "-j", "1"])
    reached(process, stops, "startup").unlink()
    reached(process, stops, "replay").unlink()
    reached(process, stops, "write")
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate()
    assert process.returncode == -signal.SIGKILL
    left = list((project / "snapshots").glob(TEMP_GLOB))
    assert [p.name.split(".routectl-")[0] for p in left] == [".toy-a.json"]
    assert f".routectl-{process.pid}-" in left[0].name
    assert path.read_bytes() == old  # whole: the old file, never a part of the new one

    update = invoke(["check", "--update", "--accept-all"], cwd=project)
    assert update.code == 0, update.stderr
    assert not list((project / "snapshots").glob(TEMP_GLOB))
    assert json.loads(path.read_text()) != data
    assert invoke(["check"], cwd=project).code == 0


def test_a_live_processs_temp_file_is_left_alone(project: Path) -> None:
    # A concurrent run's temporary file (its pid alive: this test's own) must survive a write.
    mine = project / "snapshots" / f".toy-a.json.routectl-{os.getpid()}-abc123.tmp"
    mine.write_text("partial")
    dead = project / "snapshots" / ".toy-b.json.routectl-999999999-abc123.tmp"
    dead.write_text("partial")
    path = project / "snapshots" / "toy-a.json"
    data = json.loads(path.read_text())
    moved(data)
    path.write_text(json.dumps(data))
    assert invoke(["check", "--update", "--accept-all"], cwd=project).code == 0
    assert mine.read_text() == "partial"
    assert not dead.exists()


def test_git_ignores_the_temp_file_pattern(tmp_path: Path) -> None:
    repo = tmp_path / "ignored"
    repo.mkdir()
    git(repo, "init", "-q")
    shutil.copy(ROOT / ".gitignore", repo / ".gitignore")
    git(repo, "add", ".gitignore")
    (repo / "snapshots").mkdir()
    (repo / "snapshots" / ".toy-a.json.routectl-1234-0a1b2c3d4e5f.tmp").write_text("x")
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == "A  .gitignore\n"


# --- SIGTERM and SIGHUP: the same cleanup as Ctrl-C, exit 128 + N -------------------------


def session_left(process: subprocess.Popen[str]) -> list[str]:
    """Live processes (zombies are dead) of the run's session once it has ended: a worker,
    the baseline or its workers, git. The run was started in a session of its own."""
    listed = subprocess.run(
        ["ps", "-e", "-o", "sid=", "-o", "stat=", "-o", "pid=", "-o", "args="],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    left = []
    for line in listed.splitlines():
        sid, stat, rest = line.split(None, 2)
        if int(sid) == process.pid and not stat.startswith("Z"):
            left.append(rest)
    return left


def committed_repo(tmp_path: Path) -> Path:
    """A git repository holding the toy project (no retained snapshots), one commit."""
    repo = tmp_path / "repo"
    shutil.copytree(TEMPLATE, repo, ignore=shutil.ignore_patterns("__pycache__"))
    git(repo, "init", "-q", "-b", "main")
    (repo / ".gitignore").write_text("__pycache__/\n")
    git(repo, "add", "-A")
    git(
        repo,
        "-c",
        "user.email=t@routectl.invalid",
        "-c",
        "user.name=t",
        "commit",
        "-q",
        "-m",
        "toy",
    )
    return repo


def worktrees(repo: Path) -> list[str]:
    listed = git(repo, "worktree", "list", "--porcelain")
    return [line for line in listed.splitlines() if line.startswith("worktree ")]


def assert_terminated(code: int, err: str, signum: int) -> None:
    assert code == 128 + signum, err
    assert err == f"error: terminated by {signal.Signals(signum).name}\n", err


def signalled_at(
    process: subprocess.Popen[str], stops: Path, point: str, signum: int, *, group: bool
) -> tuple[int, str, str]:
    """At `point`, send `signum` (to the run alone, as `kill PID` does, or to its whole group,
    as a CI runner may), let every other waiting process on and the run end."""
    flag = reached(process, stops, point)
    if group:
        os.killpg(process.pid, signum)
    else:
        os.kill(process.pid, signum)
    flag.unlink(missing_ok=True)
    if point not in ("startup", "shutdown"):  # those two end the process at once
        for other in ("worker", "replay"):  # a forked worker may still wait at its point
            (stops / other).unlink(missing_ok=True)
        reached(process, stops, "shutdown").unlink()
    return finish(process)


@pytest.mark.parametrize(
    ("point", "signum", "group"),
    [
        ("startup", signal.SIGTERM, False),
        ("worker", signal.SIGTERM, False),
        ("replay", signal.SIGTERM, False),
        ("replay", signal.SIGHUP, True),
        ("write", signal.SIGTERM, False),
        ("write", signal.SIGHUP, False),
        ("shutdown", signal.SIGTERM, False),
    ],
)
def test_sigterm_and_sighup_at_each_checkpoint_leave_nothing_behind(
    project: Path, tmp_path: Path, point: str, signum: int, group: bool
) -> None:
    stops = tmp_path / "stops"
    path = project / "snapshots" / "toy-a.json"
    data = json.loads(path.read_text())
    moved(data)  # so that --update writes
    path.write_text(json.dumps(data))
    before = tree_bytes(project / "snapshots")
    temp = tmp_path / "tmp"
    temp.mkdir()
    # Workers for the points before the write; one process from there on (the points it
    # passes on the way are let go in order).
    forked = point in ("worker", "replay")
    passed = {"startup": [], "write": ["startup", "replay"], "shutdown": ["startup", "replay"]}
    process = start(
        project,
        stops,
        ["check", "--update", "--accept-all", "-j", "2" if forked else "1"],
        TMPDIR=str(temp),
    )
    for earlier in passed.get(point, ["startup"]):
        reached(process, stops, earlier).unlink()
    if point == "shutdown":
        reached(process, stops, "write").unlink()
    code, out, err = signalled_at(process, stops, point, signum, group=group)
    if point == "shutdown":  # the command had finished: the update is written and said
        assert err.startswith("updated ")
        err = err.split("\n", 1)[1]
        assert json.loads(path.read_text()) != data
    assert_terminated(code, err, signum)
    if point != "shutdown":
        assert tree_bytes(project / "snapshots") == before
    assert not list((project / "snapshots").glob(TEMP_GLOB))
    assert list(temp.iterdir()) == []
    assert session_left(process) == []


@pytest.mark.parametrize(("signum", "group"), [(signal.SIGTERM, False), (signal.SIGHUP, True)])
def test_sigterm_while_the_baseline_runs_removes_worktree_folder_and_process(
    tmp_path: Path, signum: int, group: bool
) -> None:
    repo, temp, stops, process = diff_at_baseline(tmp_path)
    assert len(worktrees(repo)) == 2 and len(list(temp.iterdir())) == 1
    code, out, err = signalled_at(process, stops, "baseline", signum, group=group)
    assert_terminated(code, err, signum)
    assert worktrees(repo) == [f"worktree {repo}"]
    assert list(temp.iterdir()) == []
    assert git(repo, "status", "--porcelain") == ""
    assert session_left(process) == []


# A git that, like git itself, installs its own SIGINT handler whatever it inherited (git's
# lock-file cleanup does), and for `worktree add` stops at a checkpoint of its own first.
FAKE_GIT = """#!{python}
import os, signal, sys, time
signal.signal(signal.SIGINT, lambda signum, frame: sys.exit(130))
if "worktree" in sys.argv and "add" in sys.argv:
    flag = os.path.join(os.environ["ROUTECTL_TEST_CHECKPOINTS"], "git")
    with open(flag, "w") as handle:
        handle.write(str(os.getpid()))
    while os.path.exists(flag):
        time.sleep(0.01)
os.execv({git!r}, [{git!r}, *sys.argv[1:]])
"""


def test_ignored_sigint_with_ctrl_c_to_the_group_gives_the_undisturbed_result(
    tmp_path: Path,
) -> None:
    """A background job's diff: Ctrl-C to its group while git adds the worktree, while the
    baseline runs and while the candidate replays changes nothing, git and the baseline
    included."""
    repo = committed_repo(tmp_path)
    real_git = shutil.which("git")
    assert real_git is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text(FAKE_GIT.format(python=sys.executable, git=real_git))
    fake.chmod(0o755)
    temp = tmp_path / "tmp"
    temp.mkdir()
    args = ["diff", "--baseline-ref", "HEAD", "-j", "1"]
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
    runs = []
    for disturbed in (False, True):
        stops = tmp_path / f"stops-{disturbed}"
        process = start(repo, stops, args, ignore_sigint=True, TMPDIR=str(temp), PATH=path)
        reached(process, stops, "startup").unlink()
        for point in ("git", "baseline"):
            flag = reached(process, stops, point)
            if disturbed:
                ctrl_c(process)
            flag.unlink()
        # Each replay (the candidate's, and the judging's) until the run is done.
        while (flag := reached_one(process, stops, ("replay", "shutdown"))).name == "replay":
            if disturbed:
                ctrl_c(process)
            flag.unlink()
        flag.unlink()
        runs.append(finish(process))
        assert session_left(process) == []
    assert runs[0][0] == 0, runs[0]
    assert runs[1] == runs[0]
    assert worktrees(repo) == [f"worktree {repo}"]
    assert list(temp.iterdir()) == []


# --- Ctrl-C held back while torch is imported ---------------------------------------------

DEFERRED = """
import os, signal, sys
from routectl.runtime import interrupt

def press():
    os.kill(os.getpid(), signal.SIGINT)

events = []

def default_handler():
    return signal.getsignal(signal.SIGINT) is signal.default_int_handler

# A library user's process: nothing is deferred, the press raises inside the block.
try:
    with interrupt.deferred_interrupt():
        press()
        events.append("library: after the press, inside")
except KeyboardInterrupt:
    events.append("library: raised inside")
events.append("library handler kept: %s" % default_handler())

interrupt.raise_on_interrupt()  # the CLI's command phase
try:
    with interrupt.deferred_interrupt():
        press()
        press()
        events.append("command: after the presses, inside")
    events.append("command: not raised")
except KeyboardInterrupt:
    events.append("command: raised after the block")
events.append("command handler restored: %s" % default_handler())
with interrupt.deferred_interrupt():
    events.append("command: a quiet block")
events.append("command: a quiet block raises nothing")
try:
    with interrupt.deferred_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        events.append("command: after SIGTERM, inside")
except interrupt.Signalled as exc:
    events.append("command: %s raised after the block" % signal.Signals(exc.signum).name)
try:
    os.kill(os.getpid(), signal.SIGTERM)
    events.append("command: SIGTERM held back after the block")
except interrupt.Signalled:
    events.append("command: SIGTERM raises at once after the block")
print("\\n".join(events))
"""


def test_ctrl_c_while_torch_is_imported_is_acted_on_after_the_import():
    """Importing torch calls back into Python from C++: a KeyboardInterrupt raised in such a
    callback aborts the process (SIGABRT, exit -6) instead of unwinding it. The command phase
    holds Ctrl-C back for the block and raises it once after; a library process is untouched."""
    proc = subprocess.run(
        [sys.executable, "-c", DEFERRED],
        cwd=ROOT,
        env={"PATH": os.environ.get("PATH", os.defpath), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=default_signals,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "library: raised inside",
        "library handler kept: True",
        "command: after the presses, inside",
        "command: raised after the block",
        "command handler restored: True",
        "command: a quiet block",
        "command: a quiet block raises nothing",
        "command: after SIGTERM, inside",
        "command: SIGTERM raised after the block",
        "command: SIGTERM raises at once after the block",
    ]
