"""Output paths: an atomic write only onto a regular file (or where none exists), a device
or FIFO written in place and never replaced by a regular file, a socket or a FIFO nobody
reads refused with one line, `-` standard output for every writer, a symbolic link's file
replaced with the link kept, and `--summary` appended all or nothing."""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.fixtures.toy import invoke, make_project, tree_bytes

ROOT = Path(__file__).resolve().parents[1]
ROW = "toy_model/float16/tp1/none/c1/q64"
TEMP_GLOB = ".*.routectl-*-*.tmp"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("outputs"))


@pytest.fixture
def project(template: Path, tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(template, root)
    return root


def moved(project: Path) -> None:
    """One retained row changed: check finds a difference to report."""
    path = project / "snapshots" / "toy-a.json"
    document = json.loads(path.read_text())
    row = next(r for r in document["rows"] if r["id"] == ROW)
    row["route"]["dispatch"][0]["plan"]["split_k"] = 99
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")


@pytest.fixture
def device(tmp_path: Path) -> Path:
    """A character device that discards what it is given: a private node of /dev/null's
    kind where this user may make one; else /dev/null itself, which such a user cannot
    replace (a regression fails to write instead of replacing the system's device)."""
    if os.geteuid() != 0:
        return Path(os.devnull)
    node = tmp_path / "devices" / "null"
    node.parent.mkdir()
    os.mknod(node, stat.S_IFCHR | 0o666, os.stat(os.devnull).st_rdev)
    return node


def assert_nothing_beside(path: Path) -> None:
    assert not list(path.parent.glob(TEMP_GLOB))


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--report", "{}"],
        ["check", "--summary", "{}"],
        ["check", "--write-expected", "{}"],
        ["check", "--write-expected-ids", "{}"],
        ["report", "--html", "{}"],
        ["snapshot", "-c", "toy-a", "-o", "{}"],
    ],
)
def test_a_device_is_written_in_place_never_replaced(
    project: Path, device: Path, args: list[str]
) -> None:
    moved(project)
    before = os.stat(device)
    result = invoke([a.format(device) for a in args], cwd=project)
    assert result.code in (0, 1), result.stderr  # 1: check found the moved row
    assert "error:" not in result.stderr
    after = os.stat(device)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert after.st_ino == before.st_ino  # the same node, not a new file of that name
    if device.parent != Path(os.devnull).parent:
        assert_nothing_beside(device)


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def reading(path: Path) -> tuple[threading.Thread, list[bytes]]:
    """A reader holding the FIFO open: what it read lands in the returned list."""
    got: list[bytes] = []

    def read() -> None:
        with open(path, "rb") as handle:
            got.append(handle.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread, got


def test_a_fifo_with_a_reader_gets_the_report(project: Path, fifo: Path) -> None:
    thread, got = reading(fifo)
    # The reader counts for the writer's (non-blocking) open once it has entered its own
    # open(): a run that came too early is refused and tried again, never timed by a sleep.
    for _ in range(100):
        result = invoke(["report", "--html", fifo], cwd=project)
        if "no process reads" not in result.stderr:
            break
    thread.join(timeout=60)
    assert result.code == 0, result.stderr
    assert got and got[0].startswith(b"<!DOCTYPE html>") and got[0].endswith(b"</html>\n")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert_nothing_beside(fifo)


def test_a_fifo_nobody_reads_and_a_socket_are_refused(project: Path, fifo: Path) -> None:
    for args in (["report", "--html", fifo], ["check", "--summary", fifo]):
        result = invoke(args, cwd=project)  # at once: never blocked waiting for a reader
        assert result.code == 2
        assert result.lines == [f"error: cannot write {fifo}: no process reads the FIFO"]
    path = fifo.parent / "sock"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        result = invoke(["check", "--report", path], cwd=project)
    finally:
        server.close()
    assert result.code == 2
    assert result.lines[0].startswith(f"error: cannot write {path}: it is a socket")
    assert len(result.lines) == 1
    assert stat.S_ISSOCK(os.stat(path).st_mode)


@pytest.mark.parametrize(
    ("args", "starts"),
    [
        (["report", "--html", "-"], "<!DOCTYPE html>"),
        (["check", "--report", "-", "--format", "json", "-q"], "{"),
        (["check", "--write-expected", "-", "-q"], "{"),
        (["check", "--write-expected-ids", "-", "-q"], "["),
        (["check", "--summary", "-", "-q"], ""),
    ],
)
def test_dash_is_standard_output_for_every_writer(
    project: Path, args: list[str], starts: str
) -> None:
    moved(project)
    result = invoke(args, cwd=project)
    assert result.code in (0, 1), result.stderr
    assert not (project / "-").exists()
    assert result.stdout.startswith(starts)
    if args[:2] == ["check", "--summary"]:
        assert "## routectl check" in result.stdout
    if args[0] == "report":
        assert result.stdout.rstrip().endswith("</html>")


def test_a_symbolic_link_keeps_being_a_link_to_the_new_file(project: Path) -> None:
    moved(project)
    target = project / "reports" / "report.json"
    target.parent.mkdir()
    target.write_text("old")
    link = project / "latest.json"
    link.symlink_to(target)
    result = invoke(["check", "--report", link], cwd=project)
    assert result.code == 1, result.stderr
    assert link.is_symlink() and link.resolve() == target
    assert json.loads(target.read_text())["ok"] is False
    assert_nothing_beside(target)
    assert_nothing_beside(link)


def test_a_summary_append_that_fails_leaves_the_file_as_it_was(
    project: Path, tmp_path: Path
) -> None:
    """A file-size limit just above the earlier steps' part: the append fails part way and
    is cut back, no half table left."""
    summary = tmp_path / "summary.md"
    earlier = b"## an earlier step\n\n| a | b |\n|---|---|\n" * 20
    summary.write_bytes(earlier)
    before = tree_bytes(project / "snapshots")
    limit = len(earlier) + 10  # the summary is longer: its first bytes fit, not the rest

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = subprocess.run(
        [sys.executable, "-m", "routectl", "check", "--summary", str(summary)],
        cwd=project,
        # No bytecode written under the limit: a cut .pyc would break later imports.
        env={
            "PATH": os.environ.get("PATH", os.defpath),
            "PYTHONPATH": str(ROOT),
            "PYTHONDONTWRITEBYTECODE": "1",
        },
        capture_output=True,
        text=True,
        preexec_fn=limited,
        timeout=240,
    )
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2, done.stderr
    assert errors == [f"error: cannot append to {summary}: File too large"]
    assert summary.read_bytes() == earlier
    assert tree_bytes(project / "snapshots") == before

    appended = invoke(["check", "--summary", summary], cwd=project)
    assert appended.code == 0, appended.stderr
    grown = summary.read_bytes()
    assert grown.startswith(earlier) and b"## routectl check" in grown[len(earlier) :]
