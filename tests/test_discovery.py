"""Discovery: an engine installed from a wheel names its project through the entry-point
group `routectl.projects`, and `routectl.load_project(name=...)` and `routectl --project-name
NAME` find it with no pyproject.toml around; `load_project(directory)` takes a str or a path
and walks upward like the CLI.

The installed case is a real distribution: the tiny package in tests/fixtures/installedproj
installed by pip (no index, no build isolation: no network) into a temporary folder, then run
in subprocesses with that folder on PYTHONPATH, so importlib.metadata reads a real
`.dist-info/entry_points.txt`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import routectl
from routectl.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "installedproj"
NAME = "toy-installed"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The fixture package installed by pip into a fresh folder (returned)."""
    work = tmp_path_factory.mktemp("installed")
    source = work / "src"
    shutil.copytree(FIXTURE, source, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    target = work / "site"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-index",
            "--no-build-isolation",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return target


def run(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in `cwd` with only the installed folder and this routectl importable."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CI") and k != "NO_COLOR"}
    # This routectl (the worktree root) after the installed folder.
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.fixture
def nowhere(tmp_path) -> Path:
    """A working directory with no pyproject.toml at or above it."""
    assert not any((d / "pyproject.toml").exists() for d in (tmp_path, *tmp_path.parents))
    return tmp_path


def test_the_installed_distribution_registers_its_project(installed):
    (info,) = installed.glob("toyinstalled-0.dist-info")
    entry_points = (info / "entry_points.txt").read_text()
    assert "[routectl.projects]" in entry_points
    assert f"{NAME} = toyinstalled:PROJECT" in entry_points


def test_the_cli_finds_an_installed_project_by_name(installed, nowhere):
    snapshots = installed / "toyinstalled" / "snapshots"
    listed = run(installed, nowhere, "-m", "routectl", "--project-name", NAME, "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("tiny-linear  2 rows (2 + 0 probes)")
    # Without the name there is no project to find here.
    lost = run(installed, nowhere, "-m", "routectl", "list")
    assert lost.returncode == 2 and "no pyproject.toml with a [tool.routectl]" in lost.stderr
    # Before a snapshot is retained, the check fails on its added rows; after, it passes.
    first = run(installed, nowhere, "-m", "routectl", "--project-name", NAME, "check")
    assert first.returncode == 1, first.stderr
    written = run(
        installed,
        nowhere,
        "-m",
        "routectl",
        "--project-name",
        NAME,
        "snapshot",
        "--all",
        "--output-dir",
        str(snapshots),
    )
    assert written.returncode == 0, written.stderr
    assert json.loads((snapshots / "tiny-linear.json").read_text())["category"] == "tiny-linear"
    check = run(installed, nowhere, "-m", "routectl", "--project-name", NAME, "check")
    assert check.returncode == 0, check.stderr
    assert "tiny-linear: ok: 2 rows, no changes" in check.stdout


def test_an_unknown_name_is_one_input_error_line(installed, nowhere):
    proc = run(installed, nowhere, "-m", "routectl", "--project-name", "toy-instaled", "list")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "error: no installed routectl project named 'toy-instaled'; did you mean "
        "toy-installed? (entry point group routectl.projects: toy-installed)"
    ]


def test_the_library_loads_the_installed_project_the_engine_starts(installed, nowhere):
    script = (
        "import json, routectl\n"
        f"project = routectl.load_project(name={NAME!r})\n"
        "session = routectl.start(project, None, routectl.Hardware(70), routectl.EngineConfig(),"
        " environ={'TINY_FAST': '0'})\n"
        "print(json.dumps({'name': project.name, 'snapshots': str(project.snapshots),"
        " 'root': project.root, 'fast': session.policy.value('tiny.fast'),"
        " 'families': list(session.families)}))\n"
    )
    proc = run(installed, nowhere, "-c", script)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "name": NAME,
        "snapshots": str(installed / "toyinstalled" / "snapshots"),
        "root": None,
        "fast": False,
        "families": [],
    }


def test_load_project_takes_a_str_and_walks_upward():
    for directory in (str(ROOT / "tests" / "fixtures"), ROOT / "tests", str(ROOT)):
        project = routectl.load_project(directory)
        assert project.name == "routectl-sm70"
        assert (project.root, project.snapshots) == (ROOT, ROOT / "snapshots")


def test_load_project_refuses_a_directory_and_a_name():
    with pytest.raises(InputError, match="a project directory or a project name, not both"):
        routectl.load_project(ROOT, name=NAME)


def test_the_cli_refuses_a_directory_and_a_name(tmp_path):
    from tests.fixtures.toy import invoke, make_project

    project = make_project(tmp_path, snapshot=False)
    result = invoke(["--project-name", NAME, "list", "--project", project])
    assert result.code == 2
    assert result.lines == ["error: give --project DIR or --project-name NAME, not both"]
