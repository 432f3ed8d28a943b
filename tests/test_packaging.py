"""The distribution is the tool alone: the wheel holds `routectl` and its package data (the
schemas of its own file formats), never the project's generic `policies`/`native` packages,
which are imported from the project root that `[tool.routectl]` names."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import native
import policies

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = {
    "snapshot",
    "expected-changes",
    "report",
    "probe",
    "startup-report",
    "observed",
    "profile",
    "coverage",
}


def test_the_wheel_installs_routectl_and_its_schemas_only(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("routectl", "policies", "native"):
        shutil.copytree(
            ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("routectl-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"routectl", f"{wheel.name.split('-')[0]}-0.1.0.dist-info"}
    shipped = {
        n.removeprefix("routectl/schemas/").removesuffix(".schema.json")
        for n in names
        if n.startswith("routectl/schemas/")
    }
    assert shipped == SCHEMAS


def test_the_suite_imports_the_project_from_its_root():
    # pytest's `pythonpath` puts the root first, as `routectl.load_project` does for the CLI.
    assert Path(policies.__file__).resolve().parent == ROOT / "policies"
    assert Path(native.__file__).resolve().parent == ROOT / "native"
