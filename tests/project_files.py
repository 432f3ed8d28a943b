"""Copying the project's own files into a scratch folder, for tests that change a copy and
review it (the review tests edit one file of the copy and read the review's verdict)."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What a review of the project reads: its packages, the retained snapshots, its metadata.
REVIEWED = ("routectl", "policies", "native", "snapshots", "pyproject.toml")


def copy_project(root: Path, names: tuple[str, ...] = REVIEWED) -> Path:
    """Copy `names` (folders or files of the project) into `root`, a new folder; caches and
    half-written snapshots (`*.json.new`) stay behind. Returns `root`."""
    root.mkdir()
    for name in names:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(
                source, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.json.new")
            )
        else:
            shutil.copy(source, root / name)
    return root
